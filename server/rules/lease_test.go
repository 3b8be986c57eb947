package rules

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// The lease tests run two managers ("servers") over one store and one lease table, with
// testRules (a group g of 10 s: a recording rule, an alert of for 30s) unless said, and x at
// 10 (the alert fires 30 s after the first evaluation). A group's lease then lasts 30 s
// (max(30 s, 2 × 10 s)).
const leaseInterval = 10 * time.Second

var leaseLength = LeaseLength(DefaultLeaseMin, leaseInterval)

func otherOf(s, a, b *leaseServer) *leaseServer {
	if s == a {
		return b
	}
	return a
}

// takeoverBound is how late after the last evaluation recorded another server evaluates a
// group whose holder died: the lease (from the holder's last write), a second (the service's
// Date is a whole second), and an interval (the next slot after that).
var takeoverBound = leaseInterval + leaseLength + time.Second

// Two servers, one group: one evaluates it at every slot, the other never; only the holder
// sends notifications; the other's API shows the holder's state, recorded in the lease.
// Each evaluation costs one request for the lease (the holder's renewal) and each other
// server one read an interval.
func TestLeaseOneEvaluatorPerGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := writeFile(t, t.TempDir(), "r.yml", testRules)
		store, table, log := newMemStore(), newFakeLeaseTable(), &writeLog{}
		feed(store, time.Now(), 10*time.Minute, func(time.Duration) float64 { return 10 })
		a := newLeaseServer(t, "a", store, table, log, 0, file)
		b := newLeaseServer(t, "b", store, table, log, 0, file)
		a.start(t)
		b.start(t)
		time.Sleep(5 * time.Minute)
		synctest.Wait()

		holder := holderOf(t, file, "g", a, b)
		other := otherOf(holder, a, b)
		ws := checkOnce(t, log, "job:x:double")
		require.GreaterOrEqual(t, len(ws), 29)
		for i, w := range ws {
			require.Equal(t, holder.name, w.who)
			if i > 0 {
				require.Equal(t, leaseInterval.Milliseconds(), w.t-ws[i-1].t, "every slot")
			}
		}
		require.Equal(t, ws[len(ws)-1].t, table.record(t, file, "g").Last, "the last evaluation recorded")
		require.Equal(t, holder.name, table.record(t, file, "g").Holder)

		require.Equal(t, 1.0, holder.metric(t, "tablets_rule_group_leases_held"))
		require.Equal(t, 1.0, holder.metric(t, "tablets_rule_group_lease_held"))
		require.Equal(t, 1.0, holder.metric(t, "tablets_rule_group_lease_acquisitions_total"))
		require.Equal(t, 0.0, other.metric(t, "tablets_rule_group_leases_held"))
		require.Equal(t, 0.0, other.metric(t, "tablets_rule_group_lease_acquisitions_total"))
		for _, s := range []*leaseServer{a, b} {
			require.Equal(t, 0.0, s.metric(t, "tablets_rule_group_lease_losses_total"))
			require.Equal(t, 0.0, s.metric(t, "tablets_rule_group_lease_errors_total"))
		}

		hg := holder.m.RuleGroups(t.Context())[0]
		require.Equal(t, "ok", hg.Rules[0].Health)
		require.Equal(t, "firing", hg.Rules[1].State)
		require.Len(t, hg.Rules[1].Alerts, 1)
		// The other server shows the holder's state as recorded in the lease (read at its
		// last interval: the holder's evaluation before the last, or the last).
		og := other.m.RuleGroups(t.Context())[0]
		require.Equal(t, "g", og.Name)
		require.Len(t, og.Rules, 2)
		require.WithinRange(t, og.LastEvaluation, hg.LastEvaluation.Add(-leaseInterval-time.Millisecond), hg.LastEvaluation) // (to the millisecond)
		for i, r := range og.Rules {
			require.Equal(t, "ok", r.Health)
			require.Equal(t, hg.Rules[i].Name, r.Name)
			require.Equal(t, hg.Rules[i].Query, r.Query)
		}
		require.Equal(t, "firing", og.Rules[1].State)
		require.Len(t, og.Rules[1].Alerts, 1)
		ha, oa := hg.Rules[1].Alerts[0], og.Rules[1].Alerts[0]
		require.Equal(t, ha.Labels, oa.Labels)
		require.Equal(t, ha.Annotations, oa.Annotations)
		require.Equal(t, ha.State, oa.State)
		require.True(t, ha.ActiveAt.Truncate(time.Millisecond).Equal(oa.ActiveAt), "active at %v, the holder's %v (to the millisecond)", oa.ActiveAt, ha.ActiveAt)
		require.Equal(t, ha.Value, oa.Value)
		require.NotEmpty(t, holder.am.posted())
		require.Empty(t, other.am.posted())

		perEval := float64(table.requests.Load()) / float64(len(ws))
		t.Logf("lease requests: %.2f an evaluation (the holder's write, the other server's read)", perEval)
		require.LessOrEqual(t, perEval, 2.2)
	})
}

// The holder is killed: the other server takes the group over within the interval plus the
// lease (plus a second), every slot before and after is evaluated once, the firing alert
// keeps firing (no pending sample, no resolved notification; the same active time), and the
// new holder's first evaluation fires it.
func TestLeaseTakeoverAfterKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := writeFile(t, t.TempDir(), "r.yml", testRules)
		store, table, log := newMemStore(), newFakeLeaseTable(), &writeLog{}
		feed(store, time.Now(), 10*time.Minute, func(time.Duration) float64 { return 10 })
		a := newLeaseServer(t, "a", store, table, log, 0, file)
		b := newLeaseServer(t, "b", store, table, log, 0, file)
		a.start(t)
		b.start(t)
		time.Sleep(3*time.Minute + 3*time.Second)
		synctest.Wait()
		holder := holderOf(t, file, "g", a, b)
		other := otherOf(holder, a, b)
		require.Equal(t, "firing", holder.m.RuleGroups(t.Context())[0].Rules[1].State)
		killed := time.Now()
		holder.kill(t)
		time.Sleep(3 * time.Minute)
		synctest.Wait()

		require.True(t, other.holds(file, "g"))
		require.Equal(t, 1.0, other.metric(t, "tablets_rule_group_lease_acquisitions_total"))
		checkTakeover(t, log, store, holder, other, killed, takeoverBound)
		for _, p := range other.am.posted() {
			require.True(t, p.EndsAt.After(p.At), "the new holder sends the alert firing, never resolved: %+v", p)
		}
		require.NotEmpty(t, other.am.posted())
	})
}

// checkTakeover checks the samples around a takeover from old to new at about at: each
// slot once; the new holder's first slot at most bound after the old one's last; the alert
// firing throughout with the same active time, no pending sample after at.
func checkTakeover(t *testing.T, log *writeLog, store *memStore, old, new *leaseServer, at time.Time, bound time.Duration) {
	t.Helper()
	ws := checkOnce(t, log, "job:x:double")
	switches, lastOld, firstNew := 0, int64(0), int64(0)
	for i, w := range ws {
		if i > 0 && w.who != ws[i-1].who {
			switches++
			lastOld, firstNew = ws[i-1].t, w.t
			require.Equal(t, old.name, ws[i-1].who)
			require.Equal(t, new.name, w.who)
		} else if i > 0 {
			require.Equal(t, leaseInterval.Milliseconds(), w.t-ws[i-1].t, "every slot, at %v", time.UnixMilli(w.t).UTC())
		}
	}
	require.Equal(t, 1, switches, "one takeover")
	gap := time.Duration(firstNew-lastOld) * time.Millisecond
	t.Logf("takeover: the last slot evaluated by %s at %s, the first by %s %s later (bound %s); %s after the kill",
		old.name, time.UnixMilli(lastOld).UTC().Format(time.TimeOnly), new.name, gap, bound, time.UnixMilli(firstNew).Sub(at))
	require.LessOrEqual(t, gap, bound)

	alerts := store.samples(labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "ALERTS"))
	for series, ss := range alerts {
		for _, s := range ss {
			if s.t > at.UnixMilli() && !value.IsStaleNaN(s.f) {
				require.NotContains(t, series, `alertstate="pending"`, "pending again after the takeover, at %v", time.UnixMilli(s.t).UTC())
			}
		}
	}
	firing := alerts[`{__name__="ALERTS", alertname="High", alertstate="firing", instance="a", severity="page"}`]
	found := false
	for _, s := range firing {
		require.False(t, value.IsStaleNaN(s.f), "the firing alert ended at %v", time.UnixMilli(s.t).UTC())
		found = found || s.t == firstNew
	}
	require.True(t, found, "firing at the new holder's first evaluation")
	forState := store.samples(labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "ALERTS_FOR_STATE"))
	for _, ss := range forState {
		for _, s := range ss {
			require.Equal(t, ss[0].f, s.f, "the active time kept across the takeover")
		}
	}
}

// A holder cut off from its lease (not from the data) stops evaluating before its lease
// ends: the other takes over without a slot evaluated twice; once back, the old holder
// finds the lease taken, counts a loss and shows no alerts.
func TestLeasePartitionedHolderStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := writeFile(t, t.TempDir(), "r.yml", testRules)
		store, table, log := newMemStore(), newFakeLeaseTable(), &writeLog{}
		feed(store, time.Now(), 10*time.Minute, func(time.Duration) float64 { return 10 })
		a := newLeaseServer(t, "a", store, table, log, 0, file)
		b := newLeaseServer(t, "b", store, table, log, 0, file)
		a.start(t)
		b.start(t)
		time.Sleep(2*time.Minute + 5*time.Second)
		synctest.Wait()
		holder := holderOf(t, file, "g", a, b)
		other := otherOf(holder, a, b)
		cut := time.Now()
		holder.tableCut.Store(true)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		require.True(t, other.holds(file, "g"))
		require.False(t, holder.holds(file, "g"))
		holder.tableCut.Store(false)
		time.Sleep(time.Minute)
		synctest.Wait()

		// The holder went on until its lease was about to end: up to the lease less its
		// margin after its last write, and an interval (its last slot's).
		checkTakeover(t, log, store, holder, other, cut.Add(leaseLength), takeoverBound)
		require.Equal(t, 1.0, holder.metric(t, "tablets_rule_group_lease_losses_total"))
		require.Greater(t, holder.metric(t, "tablets_rule_group_lease_errors_total"), 0.0)
		// The server that lost the lease shows the new holder's alerts: the same alert, its
		// active time kept across the takeover.
		lostView, holderView := holder.m.RuleGroups(t.Context())[0].Rules[1].Alerts, other.m.RuleGroups(t.Context())[0].Rules[1].Alerts
		require.Len(t, lostView, 1)
		require.Len(t, holderView, 1)
		require.Equal(t, holderView[0].Labels, lostView[0].Labels)
		require.True(t, holderView[0].ActiveAt.Truncate(time.Millisecond).Equal(lostView[0].ActiveAt))
		holderOf(t, file, "g", a, b)
	})
}

// A server shut down releases its leases: the other takes the group at its next slot.
func TestLeaseReleasedOnShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := writeFile(t, t.TempDir(), "r.yml", testRules)
		store, table, log := newMemStore(), newFakeLeaseTable(), &writeLog{}
		feed(store, time.Now(), 10*time.Minute, func(time.Duration) float64 { return 10 })
		a := newLeaseServer(t, "a", store, table, log, 0, file)
		b := newLeaseServer(t, "b", store, table, log, 0, file)
		a.start(t)
		b.start(t)
		time.Sleep(2*time.Minute + 5*time.Second)
		synctest.Wait()
		holder := holderOf(t, file, "g", a, b)
		other := otherOf(holder, a, b)
		stopped := time.Now()
		holder.shutdown(t)
		require.Empty(t, table.record(t, file, "g").Holder, "released")
		require.Equal(t, 0.0, holder.metric(t, "tablets_rule_group_leases_held"))
		time.Sleep(time.Minute)
		synctest.Wait()
		checkTakeover(t, log, store, holder, other, stopped, leaseInterval)
	})
}

// A server that takes a group back restores the alerts' state the last holder left in
// ALERTS_FOR_STATE, not its own: the alert resolved and became pending again at the other
// server meanwhile. A pending alert keeps its active time across takeovers, though its for
// (5m) is shorter than the grace period (10m), under which Prometheus' restore after a
// restart starts it over: a takeover is not an outage.
func TestLeaseRetakeRestoresTheHoldersState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := writeFile(t, t.TempDir(), "r.yml", `
groups:
  - name: g
    interval: 10s
    rules:
      - record: job:x:double
        expr: x * 2
      - alert: High
        expr: x > 5
        for: 5m
`)
		store, table, log := newMemStore(), newFakeLeaseTable(), &writeLog{}
		start := time.Now()
		// x is 10 but from 8m to 9m.
		feed(store, start, 30*time.Minute, func(at time.Duration) float64 {
			if at >= 8*time.Minute && at < 9*time.Minute {
				return 0
			}
			return 10
		})
		a := newLeaseServer(t, "a", store, table, log, 0, file)
		b := newLeaseServer(t, "b", store, table, log, 0, file)
		a.start(t)
		b.start(t)
		activeAt := func(s *leaseServer) (string, time.Time) {
			for _, al := range s.m.RuleGroups(t.Context())[0].Rules[1].Alerts {
				return al.State, al.ActiveAt
			}
			return "", time.Time{}
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		first := holderOf(t, file, "g", a, b)
		second := otherOf(first, a, b)
		state, active1 := activeAt(first)
		require.Equal(t, "pending", state)

		// The first holder is cut off; the second takes over, with the active time.
		first.tableCut.Store(true)
		time.Sleep(time.Minute)
		synctest.Wait()
		state, at := activeAt(second)
		require.Equal(t, "pending", state)
		require.Equal(t, active1.Truncate(time.Second), at, "the pending alert's active time kept")
		time.Sleep(start.Add(6 * time.Minute).Sub(time.Now()))
		synctest.Wait()
		state, _ = activeAt(second)
		require.Equal(t, "firing", state, "fires when it would have without the takeover")

		// At the second holder the alert resolves (8m) and is pending again from 9m.
		time.Sleep(start.Add(10 * time.Minute).Sub(time.Now()))
		synctest.Wait()
		state, active2 := activeAt(second)
		require.Equal(t, "pending", state)
		require.False(t, active2.Before(start.Add(9*time.Minute)))

		// The first is back and the second dies: the first takes the group again, with
		// the second's state.
		first.tableCut.Store(false)
		second.kill(t)
		time.Sleep(time.Minute)
		synctest.Wait()
		require.True(t, first.holds(file, "g"))
		state, at = activeAt(first)
		require.Equal(t, "pending", state)
		require.Equal(t, active2.Truncate(time.Second), at, "the second holder's active time, not the first's own")
		time.Sleep(start.Add(15 * time.Minute).Sub(time.Now()))
		synctest.Wait()
		state, _ = activeAt(first)
		require.Equal(t, "firing", state)
		ws := checkOnce(t, log, "job:x:double")
		require.NotEmpty(t, ws)

		// The first fired it at the slot it was due (for 5m after its active time).
		var fired int64
		for _, s := range store.samples(labels.MustNewMatcher(labels.MatchEqual, "alertstate", "firing"))[`{__name__="ALERTS", alertname="High", alertstate="firing", instance="a"}`] {
			if s.t > start.Add(11*time.Minute).UnixMilli() && !value.IsStaleNaN(s.f) && fired == 0 {
				fired = s.t
			}
		}
		due := at.Add(5 * time.Minute)
		require.False(t, time.UnixMilli(fired).Before(due))
		require.Less(t, time.UnixMilli(fired).Sub(due), leaseInterval+time.Second)
		require.Equal(t, 1.0, first.metric(t, "tablets_rule_group_lease_losses_total"))
		require.Equal(t, 2.0, first.metric(t, "tablets_rule_group_lease_acquisitions_total"))
	})
}

// directLeases is a leases of holder over table whose evaluations count the timestamps
// evaluated.
func directLeases(t *testing.T, table LeaseTable, holder string, evaluated *[]time.Time) *leases {
	t.Helper()
	l, err := newLeases(&LeaseOptions{Table: table, Holder: holder}, &Options{Logger: slog.New(slog.DiscardHandler),
		EvalIteration: func(_ context.Context, _ *rules.Group, ts time.Time) { *evaluated = append(*evaluated, ts) }}, nil)
	require.NoError(t, err)
	return l
}

// A group is never evaluated twice for one timestamp: a server whose clock is behind the
// last holder's takes the lease but leaves the timestamps recorded; the old holder, its
// lease lapsed, finds it taken and evaluates nothing more. Lost replies of writes are
// recognized as this server's own.
func TestLeaseTimestampsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		table := newFakeLeaseTable()
		var xs, ys []time.Time
		var xcut, ycut atomic.Bool
		xv, yv := &tableView{t: table, cut: &xcut}, &tableView{t: table, cut: &ycut}
		x, y := directLeases(t, xv, "x", &xs), directLeases(t, yv, "y", &ys)
		g := rules.NewGroup(rules.GroupOptions{Name: "g", File: "f", Interval: leaseInterval, Opts: &rules.ManagerOptions{}})
		ctx := t.Context()
		t0 := time.Now().Truncate(time.Second)
		step := func(l *leases, i int) { l.evalIteration(ctx, g, t0.Add(time.Duration(i)*leaseInterval)) }

		step(x, 0)
		step(y, 0) // held by x
		require.Len(t, xs, 1)
		require.Empty(t, ys)
		xv.loseReplies.Store(1)
		step(x, 1) // recorded, the reply lost
		step(x, 2) // a conflict with its own write: written again
		require.Len(t, xs, 3)
		require.Equal(t, t0.Add(2*leaseInterval).UnixMilli(), table.record(t, "f", "g").Last)
		require.Equal(t, 0.0, testutil.ToFloat64(x.lost))

		time.Sleep(leaseLength + time.Second) // x stops renewing: its lease ends
		step(y, 2)                            // y takes it; 2 is recorded: not again
		step(y, 1)
		require.Empty(t, ys)
		require.Equal(t, "y", table.record(t, "f", "g").Holder)
		step(y, 3)
		require.Equal(t, []time.Time{t0.Add(3 * leaseInterval)}, ys)
		step(x, 4) // x's lease has lapsed: it reads, finds y
		require.Len(t, xs, 3)
		require.Equal(t, 1.0, testutil.ToFloat64(x.lost))
		step(y, 4)
		require.Len(t, ys, 2)

		// An account error: the holder evaluates while its lease lasts by its clock, then
		// stops; back, it renews its own lease (nobody took it) and goes on, no loss.
		ycut.Store(true)
		step(y, 5)
		require.Len(t, ys, 3, "still within the lease")
		time.Sleep(leaseLength)
		step(y, 6)
		require.Len(t, ys, 3, "lapsed: not evaluated")
		ycut.Store(false)
		step(y, 7)
		require.Len(t, ys, 4)
		require.Equal(t, 0.0, testutil.ToFloat64(y.lost))
		require.Equal(t, 1.0, testutil.ToFloat64(y.acquired))
	})
}

func TestLeaseOptions(t *testing.T) {
	store := newMemStore()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute})
	table := newFakeLeaseTable()
	for _, lo := range []*LeaseOptions{{}, {Table: table, Min: time.Second}, {Table: table, Min: 13 * time.Hour},
		{Table: table, Holder: string(make([]byte, 300))}} {
		_, err := New(&Options{QueryFunc: rules.EngineQueryFunc(engine, store), Queryable: store, Writer: store, Lease: lo})
		require.True(t, errors.Is(err, tablets.ErrInvalidOptions), "%+v: %v", lo, err)
	}
	require.Equal(t, 30*time.Second, LeaseLength(DefaultLeaseMin, time.Second))
	require.Equal(t, 2*time.Minute, LeaseLength(DefaultLeaseMin, time.Minute))
	long := LeaseLength(DefaultLeaseMin, 400*24*time.Hour)
	_, err := decodeLease(appendLease("k", leaseRecord{Length: long, File: "f", Name: "n"}))
	require.NoError(t, err, "the lease of a group of a very long interval reads back")
}

// After an outage of every server (longer than a takeover), the server that takes the
// group restores as Prometheus after a restart: an alert whose for is shorter than the
// grace period starts over, a pending one's time down does not count.
func TestLeaseRestoreAfterOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := writeFile(t, t.TempDir(), "r.yml", `
groups:
  - name: g
    interval: 10s
    rules:
      - alert: Long
        expr: x > 5
        for: 15m
      - alert: Short
        expr: x > 5
        for: 5m
`)
		store, table, log := newMemStore(), newFakeLeaseTable(), &writeLog{}
		start := time.Now()
		feed(store, start, time.Hour, func(time.Duration) float64 { return 10 })
		a := newLeaseServer(t, "a", store, table, log, 0, file)
		a.start(t)
		active := func(s *leaseServer, rule int) time.Time {
			for _, al := range s.m.RuleGroups(t.Context())[0].Rules[rule].Alerts {
				return al.ActiveAt
			}
			return time.Time{}
		}
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		long := active(a, 0)
		require.False(t, long.IsZero())
		a.kill(t)
		down := time.Now()
		time.Sleep(30 * time.Minute)
		b := newLeaseServer(t, "b", store, table, log, 0, file)
		b.start(t)
		time.Sleep(time.Minute)
		synctest.Wait()
		require.True(t, b.holds(file, "g"))
		restored := active(b, 0)
		shift := restored.Sub(long.Truncate(time.Second))
		require.InDelta(t, (30 * time.Minute).Seconds(), shift.Seconds(), 25, "Long's active time moved by the outage (%v)", shift)
		require.True(t, active(b, 1).After(down.Add(30*time.Minute)), "Short started over")
	})
}

// A reload that removes a group releases its lease.
func TestLeaseReleasedOnReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		two := testRules + "  - name: h\n    rules:\n      - record: y\n        expr: vector(1)\n"
		file := writeFile(t, t.TempDir(), "r.yml", two)
		store, table, log := newMemStore(), newFakeLeaseTable(), &writeLog{}
		a := newLeaseServer(t, "a", store, table, log, 0, file)
		a.start(t)
		time.Sleep(time.Minute)
		synctest.Wait()
		require.True(t, a.holds(file, "h"))
		require.Equal(t, "a", table.record(t, file, "h").Holder)
		writeFile(t, filepath.Dir(file), "r.yml", testRules)
		require.NoError(t, a.m.Reload())
		require.Empty(t, table.record(t, file, "h").Holder)
		require.Equal(t, "a", table.record(t, file, "g").Holder)
		require.True(t, a.holds(file, "g"))
		require.Equal(t, 1.0, a.metric(t, "tablets_rule_group_leases_held"))
	})
}
