package soak

import (
	"context"
	"net/http"
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

// TestBackfillThenLoad: the backfill's samples and the load's, from the backfill's end, are
// every scrape of every series once, in time order, each counted as sent and acknowledged;
// a 503 in the backfill is retried.
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
		time.Sleep(20 * time.Second) // the load starts later and catches up from end
		stop := make(chan struct{})
		go func() { time.Sleep(time.Minute); close(stop) }()
		w.run(context.Background(), end, stop)

		st := w.snapshot()
		if want := int64(240 * s.Len()); st.Backfilled != want {
			t.Errorf("backfilled %d samples, want %d", st.Backfilled, want)
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
			first := s.FirstScrape(i/seriesPerTarget, end.Add(-time.Hour))
			if int(a.n) != len(got) || len(got) < 240+5 { // 20s of catching up and a minute of load: 5 or 6 scrapes
				t.Fatalf("series %d: %d acknowledged, %d stored", i, a.n, len(got))
			}
			for j, smp := range got {
				if smp.Timestamp != first+int64(j)*iv {
					t.Fatalf("series %d: sample %d at %d, want %d (a gap or a repeat)", i, j, smp.Timestamp, first+int64(j)*iv)
				}
				if smp.Value != s.Value(i, smp.Timestamp) {
					t.Fatalf("series %d: value %v at %d", i, smp.Value, smp.Timestamp)
				}
			}
			if a.first != first || a.last != got[len(got)-1].Timestamp {
				t.Fatalf("series %d: acknowledged %d..%d, stored %d..%d", i, a.first, a.last, first, got[len(got)-1].Timestamp)
			}
		}
	})
}
