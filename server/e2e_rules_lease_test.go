package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/proc"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/promrun"
)

// The takeover test's rule group: a recording rule, and an alert firing from its `for`,
// with a label from a template (its ALERTS_FOR_STATE is found on the alert's own labels).
// The interval and the lease are short so that the test takes seconds.
const (
	takeoverInterval = time.Second
	takeoverLease    = 4 * time.Second // --rule.lease; max(4s, 2 × 1s)
	takeoverRules    = `
groups:
  - name: takeover
    interval: 1s
    rules:
      - record: takeover:one
        expr: vector(1)
      - alert: TakeoverFiring
        expr: label_replace(vector(1), "team", "db", "", "")
        for: 3s
        labels:
          severity: page
          owner: "{{ $labels.team }}-owner"
        annotations:
          summary: "{{ $labels.team }} is at {{ $value }}"
`
)

// amRecorder records the alerts the servers post to Alertmanager, and passes them on.
type amRecorder struct {
	target string
	mu     sync.Mutex
	posts  []amPost
}

type amPost struct {
	at     time.Time
	alerts []struct {
		Labels   map[string]string `json:"labels"`
		StartsAt time.Time         `json:"startsAt"`
		EndsAt   time.Time         `json:"endsAt"`
	}
}

func (a *amRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p := amPost{at: time.Now()}
	if err := json.Unmarshal(body, &p.alerts); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.posts = append(a.posts, p)
	a.mu.Unlock()
	resp, err := http.Post(a.target+r.URL.Path, "application/json", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (a *amRecorder) all() []amPost {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.posts)
}

// ruleServer is a `tablets serve` process evaluating the takeover rules.
type ruleServer struct {
	name    string
	p       *proc.Process
	base    string
	account *checkedAccount
}

func startRuleServer(ctx context.Context, t *testing.T, bin, db, name, ruleFile, am string, account *checkedAccount) *ruleServer {
	t.Helper()
	s := &ruleServer{name: name, account: account}
	p, err := proc.OnFreePort(5, func(port int) (*proc.Process, error) {
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p, err := proc.Start(bin, []string{"serve", "--db", db, "--listen", addr, "--connection-string", account.connectionString(),
			"--fold-interval", "-1s", "--rollup-every", "-1s", "--compact-every", "-1s", "--retain-every", "-1s",
			"--rule.file", ruleFile, "--alertmanager.url", am, "--rule.lease", takeoverLease.String(), "--rule.lease-holder", name},
			&proc.Options{PortInUse: "address already in use"})
		if err != nil {
			return nil, err
		}
		if err := p.WaitReady(ctx, time.Minute, readyAt("http://"+addr)); err != nil {
			_ = p.Stop(0)
			return nil, err
		}
		s.base = "http://" + addr
		return p, nil
	})
	require.NoError(t, err, "serve %s", name)
	s.p = p
	t.Cleanup(func() {
		if !p.Exited() {
			_ = p.Stop(0)
		}
		if t.Failed() {
			t.Logf("serve %s output:\n%s", name, p.Output())
		}
	})
	return s
}

// sample returns the value of the first sample of /metrics whose line starts with prefix
// (a name and its first labels), and whether there is one.
func (s *ruleServer) sample(t *testing.T, prefix string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			require.NoError(t, err, line)
			return v, true
		}
	}
	return 0, false
}

// TestE2ERulesTakeover: two `tablets serve` processes on one database evaluate the same rule
// file, with leases, and send their alerts to a real Alertmanager (0.25), whose webhook the
// test records. One evaluates the group; the test kills it (SIGKILL) once the alert has
// fired. The other takes the group over within the interval plus the lease (and a second:
// the service's clock is read to the second); the firing alert is neither resolved nor
// pending again (no resolved notification from either server nor from Alertmanager, which
// notifies the firing alert once; no ALERTS{alertstate="pending"} sample after the kill;
// ALERTS_FOR_STATE keeps the active time); every slot's recorded sample is there once.
// Every request of both processes to the account goes through a limit Checker.
func TestE2ERulesTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: needs Azurite and Alertmanager, builds the command; skipped under -short")
	}
	promrun.NeedAlertmanager(t)
	az := azurite.Shared(t)
	bin := buildCommand(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	hook := &webhook{}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)
	am := promrun.RunAlertmanager(t, alertmanagerConfig(hookSrv.URL))
	rec := &amRecorder{target: am.URL}
	amSrv := httptest.NewServer(rec)
	t.Cleanup(amSrv.Close)

	ruleFile := filepath.Join(t.TempDir(), "takeover.yml")
	require.NoError(t, os.WriteFile(ruleFile, []byte(takeoverRules), 0o644))
	db := "takeover" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	dbtest.DropOnCleanup(t, db)
	began := time.Now()
	servers := []*ruleServer{
		startRuleServer(ctx, t, bin, db, "a", ruleFile, amSrv.URL, newCheckedAccount(t, az, "a")),
		startRuleServer(ctx, t, bin, db, "b", ruleFile, amSrv.URL, newCheckedAccount(t, az, "b")),
	}
	heldPrefix := `tablets_rule_group_lease_held{rule_group="` + ruleFile + `;takeover"`
	holderOf := func() *ruleServer {
		var held []*ruleServer
		for _, s := range servers {
			if v, _ := s.sample(t, heldPrefix); v == 1 {
				held = append(held, s)
			}
		}
		require.LessOrEqual(t, len(held), 1, "two servers hold the lease")
		if len(held) == 1 {
			return held[0]
		}
		return nil
	}
	wait := func(what string, done func() bool) {
		t.Helper()
		for !done() {
			require.NoError(t, ctx.Err(), "%s: not within the test's time (%s since start)", what, time.Since(began).Round(time.Second))
			time.Sleep(100 * time.Millisecond)
		}
	}
	var holder *ruleServer
	wait("a server holds the lease", func() bool { holder = holderOf(); return holder != nil })
	other := servers[0]
	if holder == other {
		other = servers[1]
	}
	wait("the alert fires", func() bool { _, _, ok := hook.first("TakeoverFiring", "firing"); return ok })
	t.Logf("%s holds the group; the alert fired %s after the servers started", holder.name, time.Since(began).Round(100*time.Millisecond))
	time.Sleep(2 * time.Second)
	iterations := `prometheus_rule_group_iterations_total{rule_group="` + ruleFile + `;takeover"`
	if v, ok := other.sample(t, iterations); ok {
		require.Zero(t, v, "the other server evaluated the group")
	}

	// The account requests of the holder an evaluation, and of the other an interval.
	e0, _ := holder.sample(t, iterations)
	h0, o0 := holder.account.requests.Load(), other.account.requests.Load()
	time.Sleep(3 * time.Second)
	e1, _ := holder.sample(t, iterations)
	h1, o1 := holder.account.requests.Load(), other.account.requests.Load()
	require.Greater(t, e1, e0)
	t.Logf("account requests: %s %.1f an evaluation (the group's 2 rules and its lease), %s %.1f an interval (reading the lease)",
		holder.name, float64(h1-h0)/(e1-e0), other.name, float64(o1-o0)/(e1-e0))

	require.NoError(t, holder.p.Stop(0)) // SIGKILL
	killed := time.Now()
	wait("the other server takes the group", func() bool { return holderOf() == other })
	t.Logf("%s killed; %s holds the group %s later", holder.name, other.name, time.Since(killed).Round(100*time.Millisecond))
	time.Sleep(4 * time.Second)

	// Every slot once; the handover's gap within the bound.
	bound := takeoverInterval + takeoverLease + time.Second
	span := fmt.Sprintf("[%ds]", int(time.Since(began).Seconds())+5)
	ts := seriesTimes(ctx, t, other.base, "takeover:one"+span)
	require.NotEmpty(t, ts)
	var gap time.Duration
	var gapAt int64
	for i := 1; i < len(ts); i++ {
		d := time.Duration(ts[i]-ts[i-1]) * time.Millisecond
		require.Positive(t, d, "a timestamp twice")
		require.Zero(t, d%takeoverInterval, "off the group's slots at %s", time.UnixMilli(ts[i]).UTC())
		if d > gap {
			gap, gapAt = d, ts[i]
		}
	}
	t.Logf("takeover:one: %d samples, one a slot; the longest gap %s, the new holder's first slot %s after the kill (bound %s)",
		len(ts), gap, time.UnixMilli(gapAt).Sub(killed).Round(time.Millisecond), bound)
	require.LessOrEqual(t, gap, bound, "a gap at %s", time.UnixMilli(gapAt).UTC())
	require.Greater(t, ts[len(ts)-1], killed.UnixMilli(), "evaluated after the kill")
	require.LessOrEqual(t, time.UnixMilli(gapAt).Sub(killed), bound, "the new holder's first evaluation after the kill")

	// The alert: firing throughout.
	for _, p := range seriesOf(ctx, t, other.base, `ALERTS{alertstate="pending"}`+span) {
		for _, v := range p.Values {
			require.Less(t, v.T, killed.UnixMilli(), "ALERTS pending again after the takeover")
		}
	}
	firing := seriesOf(ctx, t, other.base, `ALERTS{alertstate="firing"}`+span)
	require.Len(t, firing, 1)
	require.Equal(t, "db-owner", firing[0].Metric["owner"])
	require.Greater(t, firing[0].Values[len(firing[0].Values)-1].T, killed.UnixMilli(), "firing after the takeover")
	forState := seriesOf(ctx, t, other.base, `ALERTS_FOR_STATE`+span)
	require.Len(t, forState, 1)
	for _, v := range forState[0].Values {
		require.Equal(t, forState[0].Values[0].V, v.V, "the active time kept")
	}
	posts := rec.all()
	after := 0
	for _, p := range posts {
		for _, a := range p.alerts {
			require.True(t, a.EndsAt.After(p.at), "a resolved alert sent at %s", p.at)
		}
		if p.at.After(killed) {
			after++
		}
	}
	require.Positive(t, after, "the new holder sends the firing alert")
	hook.mu.Lock()
	notifications := 0
	for _, p := range hook.posts {
		for _, a := range p.Alerts {
			require.NotEqual(t, "resolved", a.Status, "Alertmanager resolved the alert")
			notifications++
		}
	}
	hook.mu.Unlock()
	require.Equal(t, 1, notifications, "Alertmanager notifies the firing alert once")
	t.Logf("%d posts to Alertmanager (%d after the kill), 1 notification; the test took %s", len(posts), after, time.Since(began).Round(time.Second))
}

// seriesOf runs query (a range selector) as an instant query on the tablets at base.
func seriesOf(ctx context.Context, t *testing.T, base, query string) promrun.Matrix {
	t.Helper()
	data, err := tabletsAPI(ctx, base, url.Values{"query": {query}})
	require.NoError(t, err, query)
	var res struct {
		Result promrun.Matrix `json:"result"`
	}
	require.NoError(t, json.Unmarshal(data, &res))
	return res.Result
}

// seriesTimes are the timestamps of the one series of query, in order.
func seriesTimes(ctx context.Context, t *testing.T, base, query string) []int64 {
	t.Helper()
	m := seriesOf(ctx, t, base, query)
	require.Len(t, m, 1, query)
	var ts []int64
	for _, v := range m[0].Values {
		ts = append(ts, v.T)
	}
	return ts
}
