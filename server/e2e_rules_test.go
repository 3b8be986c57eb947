package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/promrun"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/rules"
)

// e2eRuleFile is evaluated by tablets and by Prometheus 2.42 alike, from the same path.
// A group is evaluated at times offset from the interval's multiples by a hash of its file
// and name; Prometheus 2.42 hashes the labels file and name as its slice labels did,
// Prometheus 3 (and tablets) as its string labels do, so the same group lands on different
// slots: the test names the group (%s) so that both hashes give the same millisecond.
const e2eRuleFile = `
groups:
  - name: %s
    interval: 2s
    rules:
      - record: e2e:rules_gauge:doubled
        expr: rules_gauge * 2
      - record: e2e:rules_gauge:sum
        expr: sum without (instance) (rules_gauge) + 0.1
      - alert: RulesGaugeHigh
        expr: rules_gauge > 5
        for: 4s
        labels:
          severity: page
          team: "{{ $labels.job }}"
        annotations:
          summary: "{{ $labels.instance }} of {{ $labels.job }} is at {{ $value }}"
          doubled: "{{ with query \"e2e:rules_gauge:doubled\" }}{{ . | first | value }}{{ end }}"
`

// webhook records the notifications an Alertmanager delivers to it.
type webhook struct {
	mu    sync.Mutex
	posts []webhookPost
}

type webhookPost struct {
	Status string `json:"status"`
	Alerts []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		StartsAt    time.Time         `json:"startsAt"`
		EndsAt      time.Time         `json:"endsAt"`
	} `json:"alerts"`
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p webhookPost
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.posts = append(h.posts, p)
	h.mu.Unlock()
}

// first returns the labels and annotations of the first delivery of the alert in status
// ("firing", "resolved"); ok false if none yet.
func (h *webhook) first(alert, status string) (labels, annotations map[string]string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.posts {
		for _, a := range p.Alerts {
			if a.Labels["alertname"] == alert && a.Status == status {
				return a.Labels, a.Annotations, true
			}
		}
	}
	return nil, nil, false
}

func alertmanagerConfig(webhookURL string) string {
	return fmt.Sprintf(`route:
  receiver: hook
  group_by: [alertname]
  group_wait: 500ms
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: %q
        send_resolved: true
`, webhookURL)
}

// TestE2ERules: a real Prometheus 2.42 scrapes a gauge and remote-writes it to tablets;
// both evaluate the same rule file; each sends its alerts to a real Alertmanager (0.25) of
// its own, whose webhook the test records. The alert fires after its `for` and resolves when
// the gauge drops, with the same labels and annotations from both; the recorded series are
// the same at the timestamps both have (their evaluation times align), but for those
// evaluated just after the gauge changed: tablets sees a sample once Prometheus has
// remote-written it, a fraction of a second after the scrape.
func TestE2ERules(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: needs Azurite, Prometheus and Alertmanager; skipped under -short")
	}
	promrun.Need(t)
	promrun.NeedAlertmanager(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	hooks := map[string]*webhook{"tablets": {}, "prometheus": {}}
	ams := map[string]*promrun.Alertmanager{}
	for name, h := range hooks {
		hs := httptest.NewServer(h)
		t.Cleanup(hs.Close)
		ams[name] = promrun.RunAlertmanager(t, alertmanagerConfig(hs.URL))
	}

	// The gauge: 10 until high is cleared, then 1.
	var high atomic.Bool
	high.Store(true)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		v := 1
		if high.Load() {
			v = 10
		}
		fmt.Fprintf(w, "# TYPE rules_gauge gauge\nrules_gauge %d\n", v)
	}))
	t.Cleanup(target.Close)

	ruleFile := filepath.Join(t.TempDir(), "e2e.rules.yml")
	group := alignedGroupName(t, ruleFile, 2*time.Second)
	require.NoError(t, os.WriteFile(ruleFile, []byte(fmt.Sprintf(e2eRuleFile, group)), 0o644))
	db, _, _ := openDB(t, nil)
	s, err := server.New(db, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
		Rules: &rules.Options{Files: []string{ruleFile}, Alertmanagers: []string{ams["tablets"].URL}}})
	require.NoError(t, err)
	tabletsSrv := httptest.NewServer(s)
	t.Cleanup(func() { tabletsSrv.Close(); _ = s.Close() })
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- s.Run(runCtx) }()
	t.Cleanup(func() { stopRun(); <-runDone })

	p := promrun.Start(t, promrun.Config{
		Scrape:        []promrun.ScrapeJob{{Name: "rules", Targets: []string{target.Listener.Addr().String()}}},
		RemoteWrite:   []promrun.RemoteWrite{{URL: tabletsSrv.URL + "/api/v1/write", Queue: promrun.QueueConfig{BatchSendDeadline: 100 * time.Millisecond}}},
		RuleFiles:     []string{ruleFile},
		Alertmanagers: []string{ams["prometheus"].URL},
	})
	began := time.Now()

	wait := func(what string, done func() bool) {
		t.Helper()
		for !done() {
			if ctx.Err() != nil {
				t.Fatalf("%s: not within the test's time (%s since start)", what, time.Since(began).Round(time.Second))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	firing := func(name string) func() bool {
		return func() bool { _, _, ok := hooks[name].first("RulesGaugeHigh", "firing"); return ok }
	}
	wait("both firing", func() bool { return firing("tablets")() && firing("prometheus")() })
	t.Logf("both fired %s after Prometheus started", time.Since(began).Round(100*time.Millisecond))
	time.Sleep(4 * time.Second)
	high.Store(false)
	dropped := time.Now()
	resolved := func(name string) func() bool {
		return func() bool { _, _, ok := hooks[name].first("RulesGaugeHigh", "resolved"); return ok }
	}
	wait("both resolved", func() bool { return resolved("tablets")() && resolved("prometheus")() })
	t.Logf("both resolved %s after the gauge dropped", time.Since(dropped).Round(100*time.Millisecond))

	for _, status := range []string{"firing", "resolved"} {
		tl, ta, _ := hooks["tablets"].first("RulesGaugeHigh", status)
		pl, pa, _ := hooks["prometheus"].first("RulesGaugeHigh", status)
		require.Equal(t, pl, tl, "%s alert's labels: Prometheus 2.42's, then tablets'", status)
		require.Equal(t, pa, ta, "%s alert's annotations", status)
	}
	tl, ta, _ := hooks["tablets"].first("RulesGaugeHigh", "firing")
	require.Equal(t, "page", tl["severity"])
	require.Equal(t, "rules", tl["team"])
	require.Equal(t, target.Listener.Addr().String()+" of rules is at 10", ta["summary"])

	// The recorded series, raw, over the run.
	time.Sleep(3 * time.Second) // the last evaluations arrive
	span := fmt.Sprintf("[%ds]", int(time.Since(began).Seconds())+5)
	for _, rec := range []string{"e2e:rules_gauge:doubled", "e2e:rules_gauge:sum"} {
		want := rawSamples(ctx, t, func(params url.Values) (json.RawMessage, error) { return p.API(ctx, "/api/v1/query", params) }, rec+span)
		got := rawSamples(ctx, t, func(params url.Values) (json.RawMessage, error) { return tabletsAPI(ctx, tabletsSrv.URL, params) }, rec+span)
		require.NotEmpty(t, want, rec)
		require.NotEmpty(t, got, rec)
		common, differ := 0, 0
		for ts, wv := range want {
			gv, ok := got[ts]
			if !ok {
				continue
			}
			common++
			at := time.UnixMilli(ts)
			nearChange := !at.Before(dropped.Add(-time.Second)) && at.Before(dropped.Add(3*time.Second))
			if math.Abs(gv-wv) > 1e-9*math.Abs(wv) {
				if !nearChange {
					t.Errorf("%s at %s: tablets %v, Prometheus %v", rec, at.Format(time.RFC3339Nano), gv, wv)
				}
				differ++
			}
		}
		// The evaluation times align: every tablets timestamp is one of the group's slots.
		var wantTS, gotTS []int64
		for ts := range want {
			wantTS = append(wantTS, ts)
		}
		for ts := range got {
			gotTS = append(gotTS, ts)
		}
		sort.Slice(wantTS, func(i, j int) bool { return wantTS[i] < wantTS[j] })
		for _, ts := range gotTS {
			require.Equal(t, wantTS[0]%2000, ts%2000, "%s: tablets evaluated at %d, off Prometheus' slots", rec, ts)
		}
		require.GreaterOrEqual(t, common, max(5, len(want)/2), "%s: %d timestamps in common of Prometheus' %d and tablets' %d", rec, common, len(want), len(got))
		t.Logf("%s: %d samples in common (Prometheus %d, tablets %d), %d differing just after the gauge changed", rec, common, len(want), len(got), differ)
	}
}

// alignedGroupName returns a group name whose evaluation offset in file, at interval, is
// the same millisecond for Prometheus 2.42 and for Prometheus 3 (Group.EvalTimestamp: the
// hash of the labels {file, name} modulo the interval, in nanoseconds).
func alignedGroupName(t *testing.T, file string, interval time.Duration) string {
	t.Helper()
	for i := range 1_000_000 {
		name := fmt.Sprintf("e2e-rules-%d", i)
		// 2.42: xxhash of each label's name, 0xff, value, 0xff, in label order.
		old := xxhash.Sum64String("file\xff" + file + "\xffname\xff" + name + "\xff")
		cur := labels.New(labels.Label{Name: "name", Value: name}, labels.Label{Name: "file", Value: file}).Hash()
		if time.Duration(old%uint64(interval)).Milliseconds() == time.Duration(cur%uint64(interval)).Milliseconds() {
			return name
		}
	}
	t.Fatal("no group name aligns the evaluation times")
	return ""
}

// rawSamples runs query (a range selector) as an instant query through api and returns the
// samples of its one series by timestamp (ms).
func rawSamples(_ context.Context, t *testing.T, api func(url.Values) (json.RawMessage, error), query string) map[int64]float64 {
	t.Helper()
	data, err := api(url.Values{"query": {query}})
	require.NoError(t, err, query)
	var res struct {
		ResultType string         `json:"resultType"`
		Result     promrun.Matrix `json:"result"`
	}
	require.NoError(t, json.Unmarshal(data, &res))
	require.Equal(t, "matrix", res.ResultType)
	require.LessOrEqual(t, len(res.Result), 1, "%s: %d series", query, len(res.Result))
	out := map[int64]float64{}
	for _, s := range res.Result {
		for _, p := range s.Values {
			out[p.T] = p.V
		}
	}
	return out
}

// tabletsAPI is a GET of tablets' /api/v1/query, its data.
func tabletsAPI(ctx context.Context, base string, params url.Values) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return nil, err
	}
	if env.Status != "success" {
		return nil, fmt.Errorf("tablets: %s", env.Error)
	}
	return env.Data, nil
}
