package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
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
			p.Goroutines, p.AccountRequests, err = scrapeServer(ctx, client, metricsURL)
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

// scrapeServer reads go_goroutines and tablets_account_requests_total (summed over their
// series) from a Prometheus text exposition.
func scrapeServer(ctx context.Context, client *http.Client, u string) (goroutines, requests int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	g, r := metricSums(resp.Body, "go_goroutines", "tablets_account_requests_total")
	return int64(g), int64(r), nil
}

// metricSums sums the values of the series of two metrics in a text exposition.
func metricSums(r io.Reader, a, b string) (float64, float64) {
	var sa, sb float64
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
		if (name != a && name != b) || len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		if name == a {
			sa += v
		} else {
			sb += v
		}
	}
	return sa, sb
}
