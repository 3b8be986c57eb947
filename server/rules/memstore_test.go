package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/seed71701133/tablets/server/remote"
)

// memStore is a Writer and a Queryable in memory.
type memStore struct{ *memStorage }

func newMemStore() *memStore { return &memStore{newMemStorage()} }

func (m *memStore) WriteTimeSeries(_ context.Context, tss []prompb.TimeSeries) (remote.Written, error) {
	n := 0
	for _, ts := range tss {
		b := labels.NewScratchBuilder(len(ts.Labels))
		for _, l := range ts.Labels {
			b.Add(l.Name, l.Value)
		}
		b.Sort()
		l := b.Labels()
		for _, s := range ts.Samples {
			m.add(l, memSample{t: s.Timestamp, f: s.Value})
			n++
		}
	}
	return remote.Written{Samples: n}, nil
}

// samples returns the samples of the series matching ms, by series string, in time order.
func (m *memStore) samples(ms ...*labels.Matcher) map[string][]memSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]memSample{}
	for _, s := range m.series {
		if !matchesAll(s.lset, ms) {
			continue
		}
		key := s.lset.String()
		for _, smp := range s.samples {
			out[key] = append(out[key], smp)
		}
		slices.SortFunc(out[key], func(a, b memSample) int { return compareInt64(a.t, b.t) })
	}
	return out
}

// postedAlert is an alert of Alertmanager's v2 API, as the notifier posts it.
type postedAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	// Path and Tenant are the request's path and X-Scope-OrgID; At when it was sent.
	Path, Tenant string
	At           time.Time
}

// fakeAlertmanager records what the notifier posts, without a network.
type fakeAlertmanager struct {
	mu     sync.Mutex
	alerts []postedAlert
}

func (f *fakeAlertmanager) do(_ context.Context, _ *http.Client, req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	var as []postedAlert
	if err := json.Unmarshal(body, &as); err != nil {
		return nil, err
	}
	f.mu.Lock()
	for _, a := range as {
		a.Path, a.Tenant, a.At = req.URL.Path, req.Header.Get(TenantHeader), time.Now()
		f.alerts = append(f.alerts, a)
	}
	f.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader(nil)), Request: req}, nil
}

func (f *fakeAlertmanager) posted() []postedAlert {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.alerts)
}
