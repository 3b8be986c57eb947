package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Point is one sample of the servers' state: the servers' figures summed (with one server,
// its own), and each server's in Servers, in the order the servers were started.
type Point struct {
	At float64 `json:"at_seconds"` // since the load started
	// AccountCPUSeconds is the CPU time of the Azurite the soak started (0 with an account
	// given), since it started: on Azurite every request runs on its one thread, so its
	// share of a core over the load says how busy the account was.
	AccountCPUSeconds float64 `json:"account_cpu_seconds,omitempty"`
	ServerState
	Servers []ServerState `json:"servers,omitempty"`
}

// ServerState is one server's state at a sample, or the sum of every server's.
type ServerState struct {
	RSSBytes        int64 `json:"rss_bytes"`
	Goroutines      int64 `json:"goroutines"`
	AccountRequests int64 `json:"account_requests"`
	// LiveHeapBytes is the heap the last garbage collection found live (the server's
	// go_gc_heap_live_bytes): what a leak grows, unlike the RSS, which also holds what the
	// collector has not yet taken or returned.
	LiveHeapBytes int64 `json:"live_heap_bytes,omitempty"`
	// CacheBytes is what the server's read caches hold, together (the sum of its
	// tablets_*_cache_bytes): memory that grows up to the caches' bounds by design, which
	// the live heap includes.
	CacheBytes int64 `json:"cache_bytes,omitempty"`
	// CPUSeconds is the CPU time the process has used since it started (user and system):
	// with several servers, how the work was shared between them.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// QueryRequests are the account requests of the server's queries (its
	// tablets_account_class_requests_total{class="query"}), RawCacheMisses the series its
	// raw reads read from a table (tablets_raw_cache_misses_total), FoldsTakenIn the
	// series whose cached samples took in a Fold without a read
	// (tablets_raw_cache_folds_taken_in_total), all since it started: what a slow minute of
	// the dashboards cost, and whether a Fold made the servers read again what it moved.
	QueryRequests  int64 `json:"query_requests,omitempty"`
	RawCacheMisses int64 `json:"raw_cache_misses,omitempty"`
	FoldsTakenIn   int64 `json:"folds_taken_in,omitempty"`
	// ConnGoroutines are the goroutines that the server's connections hold and that wait
	// for the account: two a connection to the account (tablets_account_connections), one a
	// connection its listeners hold (tablets_http_connections), one a request waiting for a
	// slot (tablets_account_requests_waiting). They follow the requests in flight over the
	// last 90 s (the account client's idle timeout), not the server's age (docs/soak.md, run
	// 135's goroutine profiles); the goroutine target judges the others.
	ConnGoroutines int64 `json:"connection_goroutines,omitempty"`
	// BackgroundRequests are the account requests of the server's background work since it
	// started, by task (tablets_account_table_requests_total by its task label, one of
	// backgroundTasks), and BackgroundReadBytes the bytes they read
	// (tablets_account_table_received_bytes_total{class="background"}): which of its folds,
	// rollups and compactions a slow minute of the dashboards shared the account with.
	BackgroundRequests  map[string]int64 `json:"background_requests,omitempty"`
	BackgroundReadBytes int64            `json:"background_read_bytes,omitempty"`
}

// backgroundTasks are the tasks of the servers' background work that the report counts by
// minute (the task label of tablets_account_table_requests_total).
var backgroundTasks = []string{"fold", "rollup", "compact", "flagged", "retain"}

func (s *ServerState) add(o ServerState) {
	s.RSSBytes += o.RSSBytes
	s.Goroutines += o.Goroutines
	s.AccountRequests += o.AccountRequests
	s.LiveHeapBytes += o.LiveHeapBytes
	s.CacheBytes += o.CacheBytes
	s.CPUSeconds += o.CPUSeconds
	s.QueryRequests += o.QueryRequests
	s.RawCacheMisses += o.RawCacheMisses
	s.FoldsTakenIn += o.FoldsTakenIn
	s.ConnGoroutines += o.ConnGoroutines
	for task, n := range o.BackgroundRequests {
		if s.BackgroundRequests == nil {
			s.BackgroundRequests = map[string]int64{}
		}
		s.BackgroundRequests[task] += n
	}
	s.BackgroundReadBytes += o.BackgroundReadBytes
}

// observe samples the servers (their RSS and CPU time from /proc, their goroutines, account
// requests, live heap and caches from their /metrics) and the CPU time of the account's
// process accountPid (none when 0) every interval until ctx ends, and once more at the
// end. A sample in which a server does not answer is left out, so that every point holds
// every server and its sums are comparable.
func observe(ctx context.Context, client *http.Client, servers []*server, accountPid int, began time.Time, every time.Duration, points chan<- Point) {
	defer close(points)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		p := Point{At: time.Since(began).Seconds(), Servers: make([]ServerState, len(servers))}
		var err error
		for i, s := range servers {
			if err = s.state(ctx, client, &p.Servers[i]); err != nil {
				break
			}
			p.add(p.Servers[i])
		}
		if err == nil && accountPid > 0 {
			p.AccountCPUSeconds, err = cpuSeconds(accountPid)
		}
		if err == nil {
			points <- p
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// state samples the server into st.
func (s *server) state(ctx context.Context, client *http.Client, st *ServerState) error {
	var err error
	if st.RSSBytes, err = rss(s.p.Pid()); err != nil {
		return err
	}
	if st.CPUSeconds, err = cpuSeconds(s.p.Pid()); err != nil {
		return err
	}
	return scrapeServer(ctx, client, s.internal+"/metrics", st)
}

// rss is a process's resident set size, from /proc/PID/status (Linux).
func rss(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// userHZ is the unit of the CPU times of /proc/PID/stat: USER_HZ, which Linux exports as
// 100 on every architecture whatever its kernel's tick.
const userHZ = 100

// cpuSeconds is a process's CPU time, user and system, from /proc/PID/stat (Linux).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseCPUSeconds(string(b))
}

// parseCPUSeconds reads utime and stime, the 14th and 15th fields of a /proc/PID/stat line;
// the second field, the command's name in parentheses, may hold spaces and parentheses.
func parseCPUSeconds(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %.40q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:]) // from the 3rd field, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat %.40q: %d fields", stat, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	return float64(utime+stime) / userHZ, nil
}

// cacheMetrics are the server's read caches' sizes, which scrapeServer sums.
var cacheMetrics = []string{"tablets_staging_cache_bytes", "tablets_raw_cache_bytes", "tablets_tier_block_cache_bytes",
	"tablets_index_cache_bytes", "tablets_results_cache_bytes", "tablets_folds_kept_bytes"}

// scrapeServer reads go_goroutines, tablets_account_requests_total (summed over its series),
// go_gc_heap_live_bytes, the goroutines of its connections (ConnGoroutines) and the sum of
// the cacheMetrics from a Prometheus text exposition into p.
func scrapeServer(ctx context.Context, client *http.Client, u string, p *ServerState) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	names := []string{"go_goroutines", "tablets_account_requests_total", "go_gc_heap_live_bytes",
		`tablets_account_class_requests_total{class="query"}`, "tablets_raw_cache_misses_total", "tablets_raw_cache_folds_taken_in_total",
		"tablets_account_connections", "tablets_http_connections", "tablets_account_requests_waiting",
		`tablets_account_table_received_bytes_total{class="background"}`}
	for _, task := range backgroundTasks {
		names = append(names, `tablets_account_table_requests_total{task="`+task+`"}`)
	}
	v := metricSums(resp.Body, append(names, cacheMetrics...)...)
	p.Goroutines, p.AccountRequests, p.LiveHeapBytes = int64(v[0]), int64(v[1]), int64(v[2])
	p.QueryRequests, p.RawCacheMisses, p.FoldsTakenIn = int64(v[3]), int64(v[4]), int64(v[5])
	p.ConnGoroutines = int64(2*v[6] + v[7] + v[8])
	p.BackgroundReadBytes = int64(v[9])
	p.BackgroundRequests = map[string]int64{}
	for i, task := range backgroundTasks {
		if n := int64(v[10+i]); n > 0 {
			p.BackgroundRequests[task] = n
		}
	}
	p.CacheBytes = 0
	for _, b := range v[len(names):] {
		p.CacheBytes += int64(b)
	}
	return nil
}

// hasLabel says whether the labels of a series ("a=\"x\",b=\"y\"") hold matcher
// ("b=\"y\""). Values with commas or escaped quotes are not parsed: the server's labels
// the soak matches have none.
func hasLabel(labels, matcher string) bool {
	return slices.Contains(strings.Split(labels, ","), matcher)
}

// metricSums sums the values of the series of each of names in a text exposition. A name
// may end in one label matcher, name{label="value"}: the series of name with that label.
func metricSums(r io.Reader, names ...string) []float64 {
	sums := make([]float64, len(names))
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		labels := ""
		if i := strings.IndexByte(name, '{'); i >= 0 {
			end := strings.LastIndexByte(line, '}')
			name, labels, rest = line[:i], line[i+1:end], line[end+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		for k, want := range names {
			wantName, matcher, hasMatcher := strings.Cut(strings.TrimSuffix(want, "}"), "{")
			if wantName == name && (!hasMatcher || hasLabel(labels, matcher)) {
				sums[k] += v
			}
		}
	}
	return sums
}
