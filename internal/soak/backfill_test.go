package soak

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/prometheus/prompb"
)

func TestBackfillBatches(t *testing.T) {
	s := Series{Tenant: "t1", Targets: 40, Interval: 15 * time.Second}
	end := time.UnixMilli(1_790_000_000_123)
	for _, span := range []time.Duration{time.Hour, 10 * time.Hour, 20 * time.Second} {
		batches := backfillBatches(s, end, span)
		seen := make([][]int64, s.Len())
		for _, b := range batches {
			if len(b) == 0 || len(b) > maxSamplesPerSend {
				t.Fatalf("span %s: a batch of %d samples", span, len(b))
			}
			for _, smp := range b {
				seen[smp.series] = append(seen[smp.series], smp.ts)
			}
		}
		iv := s.Interval.Milliseconds()
		for i, ts := range seen {
			first := s.FirstScrape(i/seriesPerTarget, end.Add(-span))
			want := int((end.UnixMilli() - first + iv - 1) / iv)
			if len(ts) != want {
				t.Fatalf("span %s: series %d has %d samples, want %d", span, i, len(ts), want)
			}
			for j, v := range ts {
				if v != first+int64(j)*iv || v >= end.UnixMilli() {
					t.Fatalf("span %s: series %d: sample %d at %d, want %d, before %d", span, i, j, v, first+int64(j)*iv, end.UnixMilli())
				}
			}
		}
		// A series whose samples fit in a request is never split: so that the server sees
		// many points of it at once, as in a replayed WAL.
		if per := int(span / s.Interval); per <= maxSamplesPerSend {
			where := map[int32]int{}
			for k, b := range batches {
				for _, smp := range b {
					if at, ok := where[smp.series]; ok && at != k {
						t.Fatalf("span %s: series %d split over requests %d and %d", span, smp.series, at, k)
					}
					where[smp.series] = k
				}
			}
		}
	}
	if b := backfillBatches(s, end, 0); len(b) != 0 {
		t.Fatalf("no span, %d batches", len(b))
	}
}

// TestBackfillThenLoad: the backfill's samples and then the load's, from its own start,
// are every scrape of every series in the backfill's span and in the load's, once each, in
// time order, each counted as sent and acknowledged; a 503 in the backfill is retried.
func TestBackfillThenLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRemote{stored: map[string][]prompb.Sample{}, tenants: map[string]bool{}}
		f.answer = func(attempt int) (int, string) {
			if attempt == 3 {
				return http.StatusServiceUnavailable, ""
			}
			return http.StatusNoContent, ""
		}
		s := Series{Tenant: "t1", Targets: 30, Interval: 15 * time.Second}
		w := newWriter(s, "http://remote/api/v1/write", "t1", &http.Client{Transport: f}, 2)
		end := time.Now()
		w.backfill(context.Background(), end, time.Hour)
		backfillRequests := f.attempts
		time.Sleep(20 * time.Second) // the server settles: the load starts later
		began := time.Now()
		stop := make(chan struct{})
		go func() { time.Sleep(time.Minute); close(stop) }()
		w.run(context.Background(), began, stop)

		st := w.snapshot()
		if want := int64(240 * s.Len()); st.Backfilled != want || st.BackfillAcked != want {
			t.Errorf("backfilled %d samples, %d acknowledged, want %d", st.Backfilled, st.BackfillAcked, want)
		}
		if st.Acked != st.Sent || st.Pending != 0 || st.Retries != 1 || st.Status[503] != 1 {
			t.Errorf("sent %d, acked %d, unsent %d, retries %d, status %v", st.Sent, st.Acked, st.Pending, st.Retries, st.Status)
		}
		for _, n := range f.sizes[:backfillRequests] {
			if n > maxSamplesPerSend {
				t.Fatalf("a backfill request of %d samples", n)
			}
		}
		if backfillRequests > (int(st.Backfilled)+maxSamplesPerSend-1)/maxSamplesPerSend+seriesPerTarget+1 {
			t.Errorf("%d backfill requests for %d samples", backfillRequests, st.Backfilled)
		}
		iv := s.Interval.Milliseconds()
		for i, a := range w.acked {
			got := f.stored[labelsText(s.Labels(i))]
			target := i / seriesPerTarget
			var want []int64
			for ts := s.FirstScrape(target, end.Add(-time.Hour)); ts < end.UnixMilli(); ts += iv {
				want = append(want, ts)
			}
			for ts := s.FirstScrape(target, began); ts <= began.Add(time.Minute).UnixMilli(); ts += iv {
				want = append(want, ts)
			}
			if int(a.n) != len(got) || len(got) != len(want) && len(got) != len(want)-1 { // the last scrape may fall after stop
				t.Fatalf("series %d: %d acknowledged, %d stored, %d scrapes", i, a.n, len(got), len(want))
			}
			for j, smp := range got {
				if smp.Timestamp != want[j] {
					t.Fatalf("series %d: sample %d at %d, want %d (a gap or a repeat)", i, j, smp.Timestamp, want[j])
				}
				if smp.Value != s.Value(i, smp.Timestamp) {
					t.Fatalf("series %d: value %v at %d", i, smp.Value, smp.Timestamp)
				}
			}
			if a.first != want[0] || a.last != got[len(got)-1].Timestamp {
				t.Fatalf("series %d: acknowledged %d..%d, stored %d..%d", i, a.first, a.last, want[0], got[len(got)-1].Timestamp)
			}
		}
	})
}

// TestSettle: the server counts as caught up after settleQuiet samples in a row with every
// tenant's first rollup, compaction and rollup of dirty slices (a run on every server, one
// of them done, the others' may be busy) and warm-up done, and no background job and no
// account request waiting; a busy sample starts the count again; the wait ends at its bound. Several
// servers count as caught up only when every one is.
func TestSettle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var samples int
		busy := func(n int) bool { return n <= 4 || n == 6 } // quiet at 5, 7, 8, 9
		busyHost := ""                                       // a server always busy
		firstRuns := func(n int) bool { return n >= 3 }
		client := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			samples++
			jobs := "0"
			if busy(samples) || req.URL.Host == busyHost {
				jobs = "3"
			}
			body := "# TYPE tablets_background_jobs_waiting gauge\ntablets_background_jobs_waiting " + jobs +
				"\ntablets_account_requests_waiting 0\n" +
				`tablets_background_runs_total{result="ok",task="fold",tenant="soak1"} 2` + "\n" +
				`tablets_background_runs_total{result="ok",task="rollup",tenant="soak0"} 1` + "\n" +
				`tablets_background_runs_total{result="ok",task="rollup",tenant="soak1"} 1` + "\n" +
				`tablets_background_runs_total{result="ok",task="compact",tenant="soak0"} 1` + "\n" +
				`tablets_background_runs_total{result="ok",task="flagged",tenant="soak0"} 1` + "\n" +
				`tablets_background_runs_total{result="busy",task="flagged",tenant="soak1"} 1` + "\n" +
				`tablets_background_runs_total{result="ok",task="warm",tenant="soak0"} 1` + "\n" +
				`tablets_background_runs_total{result="ok",task="warm",tenant="soak1"} 1` + "\n"
			if firstRuns(samples) {
				body += `tablets_background_runs_total{result="ok",task="compact",tenant="soak1"} 1` + "\n" +
					`tablets_background_runs_total{result="ok",task="flagged",tenant="soak1"} 1` + "\n"
			}
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		})}
		r := &run{cfg: Config{Tenants: 2}, tenancy: true, srvs: []*server{{internal: "http://internal"}}, client: client}
		t0 := time.Now()
		ok, err := r.settle(context.Background(), time.Hour)
		if err != nil || !ok {
			t.Fatalf("settle: %v, %v", ok, err)
		}
		if samples != 9 || time.Since(t0) != 90*time.Second {
			t.Errorf("settled after %d samples, %s; want 9, 1m30s", samples, time.Since(t0))
		}
		// Idle, but soak1's first compaction never ends.
		samples = 0
		busy = func(int) bool { return false }
		firstRuns = func(int) bool { return false }
		if ok, err := r.settle(context.Background(), 5*time.Minute); err != nil || ok {
			t.Errorf("a tenant's first compaction not done: settle %v, %v", ok, err)
		}
		samples = 0
		firstRuns = func(int) bool { return true }
		busy = func(int) bool { return true }
		t0 = time.Now()
		if ok, err := r.settle(context.Background(), time.Minute); err != nil || ok {
			t.Errorf("always busy: settle %v, %v", ok, err)
		}
		if time.Since(t0) != time.Minute {
			t.Errorf("the bound of 1m ended the wait after %s", time.Since(t0))
		}

		// Two servers, one of them busy all along: not caught up.
		r.srvs = []*server{{internal: "http://a"}, {internal: "http://b"}}
		busy = func(int) bool { return false }
		busyHost = "b"
		samples = 0
		if ok, err := r.settle(context.Background(), 5*time.Minute); err != nil || ok || samples != 2*30 {
			t.Errorf("one of two servers busy: settle %v, %v after %d samples", ok, err, samples)
		}
		// Both idle: caught up after settleQuiet rounds, each asking both servers.
		busyHost = ""
		samples = 0
		if ok, err := r.settle(context.Background(), 5*time.Minute); err != nil || !ok || samples != 2*settleQuiet {
			t.Errorf("both servers idle: settle %v, %v after %d samples", ok, err, samples)
		}
	})
}
