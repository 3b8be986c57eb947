package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Point is one sample of the server's state.
type Point struct {
	At              float64 `json:"at_seconds"` // since the load started
	RSSBytes        int64   `json:"rss_bytes"`
	Goroutines      int64   `json:"goroutines"`
	AccountRequests int64   `json:"account_requests"`
	// LiveHeapBytes is the heap the last garbage collection found live (the server's
	// go_gc_heap_live_bytes): what a leak grows, unlike the RSS, which also holds what the
	// collector has not yet taken or returned.
	LiveHeapBytes int64 `json:"live_heap_bytes,omitempty"`
}

// observe samples the server (its RSS from /proc, its goroutines and account requests from
// its /metrics) every interval until ctx ends, and once more at the end.
func observe(ctx context.Context, client *http.Client, pid int, metricsURL string, began time.Time, every time.Duration, points chan<- Point) {
	defer close(points)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		p := Point{At: time.Since(began).Seconds()}
		var err error
		if p.RSSBytes, err = rss(pid); err == nil {
			err = scrapeServer(ctx, client, metricsURL, &p)
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

// scrapeServer reads go_goroutines, tablets_account_requests_total (summed over its series)
// and go_gc_heap_live_bytes from a Prometheus text exposition into p.
func scrapeServer(ctx context.Context, client *http.Client, u string, p *Point) error {
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
	v := metricSums(resp.Body, "go_goroutines", "tablets_account_requests_total", "go_gc_heap_live_bytes")
	p.Goroutines, p.AccountRequests, p.LiveHeapBytes = int64(v[0]), int64(v[1]), int64(v[2])
	return nil
}

// metricSums sums the values of the series of each of names in a text exposition.
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
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name, rest = line[:i], line[strings.LastIndexByte(line, '}')+1:]
		}
		f := strings.Fields(rest)
		k := slices.Index(names, name)
		if k < 0 || len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sums[k] += v
		}
	}
	return sums
}
