package soak

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
)

func TestSeriesIndexInvertsLabels(t *testing.T) {
	s := Series{Tenant: "t1", Targets: 30, Interval: 15 * time.Second}
	seen := map[string]bool{}
	for i := range s.Len() {
		ls := s.Labels(i)
		m := map[string]string{}
		for j, l := range ls {
			if j > 0 && ls[j-1].Name >= l.Name {
				t.Fatalf("series %d: labels not sorted: %v", i, ls)
			}
			m[l.Name] = l.Value
		}
		if m["soak_tenant"] != "t1" {
			t.Fatalf("series %d: tenant label %q", i, m["soak_tenant"])
		}
		key := labelsText(ls)
		if seen[key] {
			t.Fatalf("series %d repeats %s", i, key)
		}
		seen[key] = true
		name := m["__name__"]
		delete(m, "__name__")
		if metricOf(i) != name {
			t.Fatalf("series %d is a %s, metricOf says %s", i, name, metricOf(i))
		}
		if got, ok := s.Index(name, m); !ok || got != i {
			t.Fatalf("Index(%s) = %d, %v; want %d", key, got, ok, i)
		}
	}
	if _, ok := s.Index(counterName, map[string]string{"instance": "host-30:9100", "code": "200"}); ok {
		t.Error("Index accepted a target past the last")
	}
	if _, ok := s.Index(counterName, map[string]string{"instance": "host-01:9100", "code": "200"}); ok {
		t.Error("Index accepted a non-canonical instance")
	}
}

func TestSeriesScheduleAndValues(t *testing.T) {
	s := Series{Tenant: "t1", Targets: 50, Interval: 15 * time.Second}
	start := time.UnixMilli(1_790_000_000_123)
	offsets := map[time.Duration]bool{}
	for target := range s.Targets {
		off := s.Offset(target)
		offsets[off] = true
		first := s.FirstScrape(target, start)
		if first < start.UnixMilli() || first >= start.UnixMilli()+s.Interval.Milliseconds() {
			t.Fatalf("target %d: first scrape %d not within an interval after %d", target, first, start.UnixMilli())
		}
		if first%s.Interval.Milliseconds() != off.Milliseconds() {
			t.Fatalf("target %d: first scrape %d off its offset %s", target, first, off)
		}
		if s.FirstScrape(target, time.UnixMilli(first)) != first {
			t.Fatalf("target %d: a scrape time is not its own first scrape", target)
		}
	}
	if len(offsets) < s.Targets/2 {
		t.Errorf("targets are not spread over the interval: %d offsets of %d targets", len(offsets), s.Targets)
	}
	ts := s.FirstScrape(0, start)
	for i := range seriesPerTarget {
		for k := range int64(100) {
			a, b := s.Value(i, ts+k*15000), s.Value(i, ts+(k+1)*15000)
			if a != s.Value(i, ts+k*15000) {
				t.Fatalf("series %d: Value is not deterministic", i)
			}
			if i != 2 && b < a { // every series but the gauge is a counter
				t.Fatalf("series %d: counter went down from %v to %v", i, a, b)
			}
		}
	}
	// A classic histogram's buckets are cumulative, +Inf is the count.
	for b := 1; b < len(bucketBounds); b++ {
		if s.Value(3+b, ts) < s.Value(2+b, ts) {
			t.Fatalf("bucket %s holds less than %s", bucketBounds[b], bucketBounds[b-1])
		}
	}
	if s.Value(3+len(bucketBounds)-1, ts) != s.Value(4+len(bucketBounds), ts) {
		t.Fatal("the +Inf bucket is not the count")
	}
	// Another tenant scrapes at other offsets.
	o := Series{Tenant: "t2", Targets: 50, Interval: 15 * time.Second}
	same := 0
	for target := range s.Targets {
		if o.Offset(target) == s.Offset(target) {
			same++
		}
	}
	if same == s.Targets {
		t.Error("two tenants' targets have the same offsets")
	}
}

// fakeRemote is a remote-write endpoint in memory: it answers each attempt as answer says,
// and records the samples of the requests it answers 2xx.
type fakeRemote struct {
	answer func(attempt int) (int, string) // status, Retry-After

	mu       sync.Mutex
	attempts int
	at       []time.Time // each attempt's time
	sizes    []int       // each request's samples
	stored   map[string][]prompb.Sample
	tenants  map[string]bool
}

func (f *fakeRemote) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, err
	}
	var wr prompb.WriteRequest
	if err := wr.Unmarshal(raw); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	f.at = append(f.at, time.Now())
	n := 0
	for _, ts := range wr.Timeseries {
		n += len(ts.Samples)
	}
	f.sizes = append(f.sizes, n)
	f.tenants[req.Header.Get("X-Scope-OrgID")] = true
	code, after := f.answer(f.attempts)
	if code/100 == 2 {
		for _, ts := range wr.Timeseries {
			key := labelsText(ts.Labels)
			f.stored[key] = append(f.stored[key], ts.Samples...)
		}
	}
	h := http.Header{}
	if after != "" {
		h.Set("Retry-After", after)
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(bytes.NewReader(nil)), Request: req}, nil
}

func TestWriterRetriesAndAcknowledges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRemote{stored: map[string][]prompb.Sample{}, tenants: map[string]bool{}}
		f.answer = func(attempt int) (int, string) {
			switch attempt {
			case 2:
				return http.StatusServiceUnavailable, "7" // retried after 7s
			case 3:
				return http.StatusTooManyRequests, "" // retried after the back-off
			case 5:
				return http.StatusBadRequest, "" // dropped
			}
			return http.StatusNoContent, ""
		}
		s := Series{Tenant: "t1", Targets: 200, Interval: 15 * time.Second}                  // 2,800 series
		w := newWriter(s, "http://remote/api/v1/write", "t1", &http.Client{Transport: f}, 1) // one shard: its attempts in order
		stop := make(chan struct{})
		start := time.Now()
		go func() { time.Sleep(time.Minute); close(stop) }()
		w.run(context.Background(), start, stop)

		st := w.snapshot()
		if want := int64(4 * s.Len()); st.Sent != want { // a minute: 4 scrapes of each target
			t.Errorf("sent %d samples, want %d", st.Sent, want)
		}
		if st.Acked+st.Dropped != st.Sent || st.Dropped == 0 || st.Pending != 0 {
			t.Errorf("sent %d = acked %d + dropped %d (+ unsent %d)?", st.Sent, st.Acked, st.Dropped, st.Pending)
		}
		if st.Retries != 2 || st.Status[503] != 1 || st.Status[429] != 1 || st.Status[400] != 1 {
			t.Errorf("retries %d, status %v", st.Retries, st.Status)
		}
		if !f.tenants["t1"] || len(f.tenants) != 1 {
			t.Errorf("tenant headers %v", f.tenants)
		}
		if gap := f.at[2].Sub(f.at[1]); gap != 7*time.Second {
			t.Errorf("retried a 503 with Retry-After: 7 after %s", gap)
		}
		// The back-off doubles at each retry, as Prometheus', Retry-After or not.
		if gap := f.at[3].Sub(f.at[2]); gap != 2*minBackoff {
			t.Errorf("retried a 429 without Retry-After after %s, want %s", gap, 2*minBackoff)
		}
		for _, n := range f.sizes {
			if n > maxSamplesPerSend {
				t.Fatalf("a request of %d samples", n)
			}
		}
		// What the writer counts as acknowledged is what the remote stored, series by
		// series, in time order, with the series' values.
		var stored int64
		for i, a := range w.acked {
			got := f.stored[labelsText(s.Labels(i))]
			stored += int64(len(got))
			if int(a.n) != len(got) {
				t.Fatalf("series %d: %d acknowledged, %d stored", i, a.n, len(got))
			}
			for j, smp := range got {
				if j > 0 && smp.Timestamp <= got[j-1].Timestamp {
					t.Fatalf("series %d: samples out of order", i)
				}
				if smp.Value != s.Value(i, smp.Timestamp) {
					t.Fatalf("series %d: value %v at %d, want %v", i, smp.Value, smp.Timestamp, s.Value(i, smp.Timestamp))
				}
				if (smp.Timestamp-s.FirstScrape(i/seriesPerTarget, start))%15000 != 0 {
					t.Fatalf("series %d: a sample at %d, off its target's schedule", i, smp.Timestamp)
				}
			}
			if len(got) > 0 && (a.first != got[0].Timestamp || a.last != got[len(got)-1].Timestamp) {
				t.Fatalf("series %d: acknowledged %d..%d, stored %d..%d", i, a.first, a.last, got[0].Timestamp, got[len(got)-1].Timestamp)
			}
		}
		if stored != st.Acked {
			t.Errorf("stored %d samples, acknowledged %d", stored, st.Acked)
		}
	})
}

// TestWriterIsDeterministic: the same series scraped from the same start send the same
// samples (how they are cut into requests depends on timing, as in Prometheus).
func TestWriterIsDeterministic(t *testing.T) {
	sent := func(tenant string) map[string][]prompb.Sample {
		out := map[string][]prompb.Sample{}
		synctest.Test(t, func(t *testing.T) {
			f := &fakeRemote{stored: out, tenants: map[string]bool{}, answer: func(int) (int, string) { return 204, "" }}
			w := newWriter(Series{Tenant: tenant, Targets: 300, Interval: 15 * time.Second}, "http://remote/", "", &http.Client{Transport: f}, 3)
			stop := make(chan struct{})
			go func() { time.Sleep(45 * time.Second); close(stop) }()
			w.run(context.Background(), time.Now(), stop)
		})
		return out
	}
	a, b := sent("a"), sent("a")
	if len(a) != 300*seriesPerTarget {
		t.Fatalf("%d series sent, want %d", len(a), 300*seriesPerTarget)
	}
	for key, sa := range a {
		if !slices.EqualFunc(sa, b[key], func(x, y prompb.Sample) bool { return x.Timestamp == y.Timestamp && x.Value == y.Value }) {
			t.Fatalf("%s: %v, then %v", key, sa, b[key])
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRetryAfter(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "3": 3 * time.Second, "-1": 0, "soon": 0, "0": 0} {
		if got := retryAfter(v); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}
