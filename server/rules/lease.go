package rules

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/api"
)

// DefaultLeaseMin is LeaseOptions.Min's default: the shortest lease of a group.
const DefaultLeaseMin = 30 * time.Second

// minLeaseMin is the least LeaseOptions.Min accepted: the holder stops a second before the
// lease's end (leaseMargin), and must have some of it left.
const minLeaseMin = 2 * time.Second

// maxLeaseMin is the most LeaseOptions.Min accepted.
const maxLeaseMin = 12 * time.Hour

// LeaseOptions make one server of many evaluate each rule group (Options.Lease): a lease per
// group in the account, taken and renewed conditionally on its ETag. See docs/rules.md,
// "Several servers".
type LeaseOptions struct {
	// Table holds the leases (required; package server gives the catalog table of the
	// tenant's database).
	Table LeaseTable
	// Holder names this manager in the leases it holds (default: the host name, the
	// process id and a random number). It must differ from every other server's: two
	// managers of one name would both hold a lease.
	Holder string
	// Min is the shortest lease (default 30s, at least 2s): a group's lease lasts
	// max(Min, 2 × its interval).
	Min time.Duration
}

// LeaseLength is the lease of a group of the interval: max(least, 2 × interval). Two
// intervals, because the holder renews the lease once an interval, after the evaluation:
// an evaluation may take up to an interval (as long as Prometheus lets one take before
// iterations are missed) without the lease lapsing. At least least (LeaseOptions.Min, 30 s
// by default), so that for short intervals a request the SDK retries for a while (3
// retries, seconds apart) does not cost the lease. At most 366 days (a holder of a group of
// a longer interval renews its lapsed lease at each evaluation).
func LeaseLength(least, interval time.Duration) time.Duration {
	return min(max(least, 2*interval), maxLeaseLength)
}

// leaseMargin is how long before its lease's end (by its own clock, from the moment it sent
// the write that renewed the lease) the holder stops evaluating: a tenth of the lease, at
// least a second. It covers the drift of its clock and the disagreement between the
// service's clocks (the one that stamps an entity's Timestamp, the one that dates a reply).
func leaseMargin(length time.Duration) time.Duration { return max(length/10, time.Second) }

// leases decides, at each evaluation of each group, whether this manager evaluates it.
type leases struct {
	table     LeaseTable
	holder    string
	min       time.Duration
	log       *slog.Logger
	queryFunc rules.QueryFunc
	queryable storage.Queryable
	extURL    *url.URL
	tolerance time.Duration // Options.OutageTolerance
	grace     time.Duration // Options.ForGracePeriod
	inner     rules.GroupEvalIterationFunc

	mu     sync.Mutex
	groups map[string]*groupLease // by rules.GroupKey

	held                     prometheus.Gauge
	heldBy                   *prometheus.GaugeVec
	acquired, lost, failures prometheus.Counter
}

// groupLease is what a manager knows of one group's lease. Its fields are guarded by
// leases.mu; its group's goroutine is the only one that writes them but for release.
type groupLease struct {
	key, file, name, rk string
	held                bool      // this manager holds the lease, until validUntil
	mine                bool      // the last write this manager knows of is its own (held or not)
	validUntil          time.Time // by this process's clock (monotonic)
	etag                string    // of the last write or read
	last                int64     // the last evaluation timestamp recorded or done here, Unix ms
	restore             bool      // restore the for state before the next evaluation
	length              time.Duration
	state               string // S of the last write or read: the group's state as its holder saw it
}

func newLeases(o *LeaseOptions, m *Options, extURL *url.URL) (*leases, error) {
	if o.Table == nil {
		return nil, fmt.Errorf("rules: %w: Lease.Table is required", tablets.ErrInvalidOptions)
	}
	if o.Min == 0 {
		o.Min = DefaultLeaseMin
	}
	if o.Min < minLeaseMin || o.Min > maxLeaseMin {
		return nil, fmt.Errorf("rules: %w: Lease.Min %v: want 2s to 12h", tablets.ErrInvalidOptions, o.Min)
	}
	if o.Holder == "" {
		o.Holder = defaultHolder()
	}
	if len(o.Holder) > 256 {
		return nil, fmt.Errorf("rules: %w: Lease.Holder is longer than 256 bytes", tablets.ErrInvalidOptions)
	}
	l := &leases{table: o.Table, holder: o.Holder, min: o.Min, log: m.Logger.With("part", "leases"),
		queryFunc: m.QueryFunc, queryable: m.Queryable, extURL: extURL, tolerance: m.OutageTolerance,
		grace: m.ForGracePeriod, inner: m.EvalIteration, groups: map[string]*groupLease{}}
	l.held = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tablets_rule_group_leases_held",
		Help: "Rule groups whose lease this server holds: it evaluates them."})
	l.heldBy = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tablets_rule_group_lease_held",
		Help: "1 if this server holds the rule group's lease (it evaluates the group), else 0."}, []string{"rule_group"})
	l.acquired = prometheus.NewCounter(prometheus.CounterOpts{Name: "tablets_rule_group_lease_acquisitions_total",
		Help: "Leases of rule groups taken: free, released, or ended with their holder."})
	l.lost = prometheus.NewCounter(prometheus.CounterOpts{Name: "tablets_rule_group_lease_losses_total",
		Help: "Leases of rule groups this server held and found taken by another."})
	l.failures = prometheus.NewCounter(prometheus.CounterOpts{Name: "tablets_rule_group_lease_errors_total",
		Help: "Requests for leases of rule groups that failed (the account), or leases that did not decode."})
	if m.Registerer != nil {
		for _, c := range []prometheus.Collector{l.held, l.heldBy, l.acquired, l.lost, l.failures} {
			if err := m.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("rules: registering the leases' metrics: %w", err)
			}
		}
	}
	return l, nil
}

// defaultHolder is the host name, the process id and 32 random bits.
func defaultHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

func (l *leases) group(g *rules.Group) *groupLease {
	key := rules.GroupKey(g.File(), g.Name())
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groups[key]
	if gl == nil {
		gl = &groupLease{key: key, file: g.File(), name: g.Name(), rk: LeaseRowKey(g.File(), g.Name()), restore: true}
		l.groups[key] = gl
		l.heldBy.WithLabelValues(key).Set(0)
	}
	return gl
}

// holds reports whether this manager holds the lease of the group name of file.
func (l *leases) holds(file, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	gl := l.groups[rules.GroupKey(file, name)]
	return gl != nil && gl.held
}

// holderState returns the state of the group name of file as the holder of its lease saw
// it at its last evaluation, if this manager does not hold the lease and read one.
func (l *leases) holderState(file, name string) (groupState, bool) {
	l.mu.Lock()
	gl := l.groups[rules.GroupKey(file, name)]
	var state string
	if gl != nil && !gl.held {
		state = gl.state
	}
	l.mu.Unlock()
	if state == "" {
		return groupState{}, false
	}
	st, err := decodeState(state)
	return st, err == nil
}

// setHeld records a change of gl.held. Called with l.mu held.
func (l *leases) setHeld(gl *groupLease, held bool) {
	if gl.held == held {
		return
	}
	gl.held = held
	if held {
		l.held.Inc()
		l.heldBy.WithLabelValues(gl.key).Set(1)
	} else {
		l.held.Dec()
		l.heldBy.WithLabelValues(gl.key).Set(0)
	}
}

// evalIteration is the groups' rules.GroupEvalIterationFunc: it evaluates g at ts if this
// manager holds g's lease (taking it if it is free, released or ended) and ts is after the
// last evaluation recorded; then it records ts, which renews the lease. A group taken from
// another holder (or from none) has its alerts' for state restored before its evaluation.
func (l *leases) evalIteration(ctx context.Context, g *rules.Group, ts time.Time) {
	gl := l.group(g)
	length := LeaseLength(l.min, g.Interval())
	if !l.hold(ctx, g, gl, length) {
		return
	}
	l.mu.Lock()
	due, restore := ts.UnixMilli() > gl.last, gl.restore
	l.mu.Unlock()
	if !due {
		return // evaluated already (by the last holder: this server's clock is behind)
	}
	if restore {
		l.restore(ctx, g, ts, length)
		l.mu.Lock()
		gl.restore = false
		l.mu.Unlock()
	}
	l.inner(ctx, g, ts)
	l.record(ctx, g, gl, ts, length)
}

// hold reports whether this manager holds gl's lease now, reading the lease and taking or
// renewing it if its own hold has ended by its clock.
func (l *leases) hold(ctx context.Context, g *rules.Group, gl *groupLease, length time.Duration) bool {
	l.mu.Lock()
	held, valid := gl.held, time.Now().Before(gl.validUntil)
	l.mu.Unlock()
	if held && valid {
		return true
	}
	body, etag, svcNow, err := l.table.Get(ctx, LeasePartition, gl.rk)
	if errors.Is(err, ErrLeaseNotFound) {
		return l.take(ctx, g, gl, leaseRecord{}, "", length, true)
	}
	if err != nil {
		l.fail("reading the lease", gl, err)
		l.drop(gl) // without an answer, this manager cannot know it still holds it
		return false
	}
	rec, err := decodeLease(body)
	if err == nil && rec.Written.IsZero() {
		err = fmt.Errorf("%w: no Timestamp", ErrBadLease)
	}
	if err != nil {
		l.fail("decoding the lease", gl, err)
		l.drop(gl)
		return false
	}
	switch {
	case rec.Holder == l.holder:
		// The last write is this manager's (a renewal it could not confirm in time, or
		// whose reply was lost): renewed conditionally on it, nobody held it meanwhile.
		return l.take(ctx, g, gl, rec, etag, length, false)
	case rec.Holder == "" || !svcNow.Before(rec.Written.Add(rec.Length)):
		// Released, or ended by the service's clock: the Date of the reply (a whole second,
		// so at most that early) against the Timestamp of the holder's last write.
		return l.take(ctx, g, gl, rec, etag, length, false)
	default:
		l.lose(g, gl, rec)
		return false
	}
}

// take writes the lease as held by this manager, conditionally on etag (or as a new entity),
// and reports whether it holds it. rec is the lease read (its last evaluation is kept).
func (l *leases) take(ctx context.Context, g *rules.Group, gl *groupLease, rec leaseRecord, etag string, length time.Duration, insert bool) bool {
	l.mu.Lock()
	last, wasMine := max(gl.last, rec.Last), rec.Holder == l.holder && !insert
	l.mu.Unlock()
	// The state of the last evaluation stays until this manager records one of its own.
	body := appendLease(gl.rk, leaseRecord{Holder: l.holder, Length: length, Last: last, File: gl.file, Name: gl.name, State: rec.State})
	sent := time.Now()
	var err error
	if insert {
		etag, err = l.table.Insert(ctx, body)
	} else {
		etag, err = l.table.Replace(ctx, body, etag)
	}
	if errors.Is(err, ErrLeaseConflict) {
		// Another took it first; or this write was applied and its reply lost: the next
		// iteration reads whose it is.
		l.drop(gl)
		return false
	}
	if err != nil {
		l.fail("taking the lease", gl, err)
		l.drop(gl)
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !wasMine {
		// Free, released or ended: another may have evaluated the group since this
		// manager last did, if ever.
		gl.restore = true
		if gl.mine {
			l.lost.Inc() // another wrote it since this manager's last write
		}
	}
	if !wasMine || !gl.mine { // (a write of its own, its reply lost, is taken too)
		l.acquired.Inc()
		l.log.Info("rule group lease taken", "group", gl.key, "from", rec.Holder, "last_evaluation", time.UnixMilli(last).UTC())
	}
	l.setHeld(gl, true)
	gl.mine, gl.length = true, length
	gl.etag, gl.validUntil, gl.last, gl.state = etag, sent.Add(length-leaseMargin(length)), last, rec.State
	return true
}

// record writes ts as the last evaluation of gl, renewing the lease, conditionally on its
// ETag. A conflict means another server took the lease (this one's evaluation of ts overran
// it), unless the write was applied and its reply lost.
func (l *leases) record(ctx context.Context, g *rules.Group, gl *groupLease, ts time.Time, length time.Duration) {
	state := encodeState(apiGroup(g))
	l.mu.Lock()
	gl.last = max(gl.last, ts.UnixMilli())
	etag, last := gl.etag, gl.last
	l.mu.Unlock()
	body := appendLease(gl.rk, leaseRecord{Holder: l.holder, Length: length, Last: last, File: gl.file, Name: gl.name, State: state})
	sent := time.Now()
	newETag, err := l.table.Replace(ctx, body, etag)
	if errors.Is(err, ErrLeaseConflict) {
		rbody, retag, _, rerr := l.table.Get(ctx, LeasePartition, gl.rk)
		rec, derr := decodeLease(rbody)
		switch {
		case rerr == nil && derr == nil && rec.Holder == l.holder:
			// The last write is this manager's own, applied with its reply lost (only this
			// manager writes its name): written again over it.
			if newETag, err = l.table.Replace(ctx, body, retag); errors.Is(err, ErrLeaseConflict) {
				l.drop(gl)
				return
			}
		case rerr == nil && derr == nil:
			l.lose(g, gl, rec)
			return
		default:
			l.fail("reading the lease after a conflict", gl, errors.Join(rerr, derr))
			l.drop(gl)
			return
		}
	}
	if err != nil {
		// The lease stays held until it ends by this server's clock; the next iteration
		// reads it if this write's fate is still unknown then.
		l.fail("recording an evaluation", gl, err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	gl.etag, gl.validUntil, gl.state = newETag, sent.Add(length-leaseMargin(length)), state
}

// lose records that another server holds gl's lease: this manager forgets the alerts of
// the group (the holder's state is the one that counts; if this manager takes the group
// again it restores the state from ALERTS_FOR_STATE), and restores before it evaluates
// again.
func (l *leases) lose(g *rules.Group, gl *groupLease, rec leaseRecord) {
	l.mu.Lock()
	wasMine := gl.mine
	l.setHeld(gl, false)
	gl.mine, gl.restore, gl.validUntil = false, true, time.Time{}
	gl.last, gl.state = max(gl.last, rec.Last), rec.State
	l.mu.Unlock()
	if wasMine {
		l.lost.Inc()
		l.log.Warn("rule group lease lost to another server", "group", gl.key)
	}
	forgetAlerts(g)
}

// drop ends this manager's hold of gl without knowing who holds the lease now (an account
// error, a conflict): it evaluates again once it has read the lease as its own, renewed.
// Its alerts' state stays: if nobody else took the lease meanwhile it is still the state.
func (l *leases) drop(gl *groupLease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setHeld(gl, false)
	gl.validUntil = time.Time{}
}

func (l *leases) fail(what string, gl *groupLease, err error) {
	l.failures.Inc()
	l.log.Warn("rule group lease: "+what, "group", gl.key, "err", err)
}

// release gives up every lease this manager holds (on shutdown): the entity keeps the last
// evaluation and names no holder, so another server takes the group at its next iteration
// instead of waiting for the lease to end. Best effort: a lease not released ends anyway.
func (l *leases) release(ctx context.Context, keep func(key string) bool) {
	type releasing struct {
		gl   *groupLease
		body []byte
		etag string
	}
	l.mu.Lock()
	var todo []releasing
	for key, gl := range l.groups {
		if keep != nil && keep(key) {
			continue
		}
		if gl.held {
			// What to write, read under the lock (a last evaluation may still record).
			todo = append(todo, releasing{gl, appendLease(gl.rk, leaseRecord{Length: gl.length, Last: gl.last, File: gl.file,
				Name: gl.name, State: gl.state}), gl.etag})
		}
		l.setHeld(gl, false)
		delete(l.groups, key)
		l.heldBy.DeleteLabelValues(key)
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.table.Replace(ctx, r.body, r.etag); err != nil && !errors.Is(err, ErrLeaseConflict) {
				l.fail("releasing", r.gl, err)
			}
		}()
	}
	wg.Wait()
}

// forgetAlerts makes every alert of g's alerting rules inactive and resolved long ago: the
// next evaluation of a rule drops them (a pending alert of its result starts anew) before it
// sends anything, and /api/v1/alerts lists none meanwhile.
func forgetAlerts(g *rules.Group) {
	for _, r := range g.Rules() {
		if ar, ok := r.(*rules.AlertingRule); ok {
			ar.ForEachActiveAlert(func(a *rules.Alert) {
				a.State, a.ResolvedAt, a.LastSentAt = rules.StateInactive, time.Unix(0, 0), time.Unix(0, 0)
			})
		}
	}
}

// restore sets the for state of g's alerts, before its first evaluation at ts by this
// manager since it took the lease, from ALERTS_FOR_STATE: each alerting rule's expression
// is evaluated at ts (a query: nothing written, nothing sent) for the alerts active now,
// and each takes the active time its last ALERTS_FOR_STATE sample holds. A sample at most
// two leases and two intervals before ts is a takeover: the active time is kept as it is,
// so a firing alert fires at this evaluation and a pending one fires when it would have.
// An older one is an outage, restored as Prometheus restores after a restart
// (rules.Group.RestoreForState): alerts whose for is shorter than the grace period start
// over, a pending alert's time down does not count, and none fires within the grace period.
func (l *leases) restore(ctx context.Context, g *rules.Group, ts time.Time, length time.Duration) {
	var ars []*rules.AlertingRule
	for _, r := range g.Rules() {
		if ar, ok := r.(*rules.AlertingRule); ok {
			ars = append(ars, ar)
		}
	}
	if len(ars) == 0 {
		return
	}
	offset := g.QueryOffset()
	forgetAlerts(g) // from an earlier hold: stale
	for _, ar := range ars {
		ar.SetRestored(false) // no ALERTS written by the query below
		if _, err := ar.Eval(ctx, offset, ts, l.queryFunc, l.extURL, g.Limit()); err != nil {
			l.log.Warn("restoring the for state: evaluating the rule", "group", rules.GroupKey(g.File(), g.Name()), "alert", ar.Name(), "err", err)
		}
	}
	defer func() {
		for _, ar := range ars {
			ar.SetRestored(true)
		}
	}()
	q, err := l.queryable.Querier(ts.Add(-l.tolerance).UnixMilli(), ts.UnixMilli())
	if err != nil {
		l.log.Error("restoring the for state", "group", rules.GroupKey(g.File(), g.Name()), "err", err)
		return
	}
	defer q.Close()
	handover := 2 * (length + g.Interval())
	evalAt := ts.Add(-offset)
	for _, ar := range ars {
		if ar.ActiveAlertsCount() == 0 {
			continue
		}
		last, err := lastForState(ctx, q, ar)
		if err != nil {
			l.log.Error("restoring the for state", "group", rules.GroupKey(g.File(), g.Name()), "alert", ar.Name(), "err", err)
			continue
		}
		hold := ar.HoldDuration()
		ar.ForEachActiveAlert(func(a *rules.Alert) {
			s, ok := last[a.Labels.String()]
			if !ok || value.IsStaleNaN(s.f) || math.IsNaN(s.f) {
				return
			}
			downAt := time.UnixMilli(s.t)
			activeAt := time.Unix(int64(s.f), 0).UTC()
			if evalAt.Sub(downAt) <= handover {
				a.ActiveAt = activeAt
				return
			}
			if hold < l.grace {
				return // as Prometheus: starts over
			}
			switch remaining := hold - downAt.Sub(activeAt); {
			case remaining <= 0: // was firing
				a.ActiveAt = activeAt
			case remaining < l.grace:
				a.ActiveAt = ts.Add(l.grace).Add(-hold)
			default:
				a.ActiveAt = activeAt.Add(ts.Sub(downAt))
			}
		})
	}
}

// lastSample is a series' last sample.
type lastSample struct {
	t int64
	f float64
}

// lastForState returns the last ALERTS_FOR_STATE sample of each alert of ar, by its labels
// (the series' without its name). It selects on the alert's name and the rule's labels that
// are not templates: Prometheus' QueryForStateSeries selects on templates too, which match
// nothing once expanded.
func lastForState(ctx context.Context, q storage.Querier, ar *rules.AlertingRule) (map[string]lastSample, error) {
	ms := []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "ALERTS_FOR_STATE"),
		labels.MustNewMatcher(labels.MatchEqual, labels.AlertName, ar.Name()),
	}
	ar.Labels().Range(func(lb labels.Label) {
		if !strings.Contains(lb.Value, "{{") && lb.Name != labels.AlertName {
			ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, lb.Name, lb.Value))
		}
	})
	set := q.Select(ctx, false, nil, ms...)
	out := map[string]lastSample{}
	var it chunkenc.Iterator
	for set.Next() {
		s := set.At()
		it = s.Iterator(it)
		var last lastSample
		found := false
		for it.Next() == chunkenc.ValFloat {
			last.t, last.f = it.At()
			found = true
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		if found {
			out[s.Labels().DropMetricName().String()] = last
		}
	}
	return out, set.Err()
}

// notHeld is the view of a group this manager does not evaluate (another server holds its
// lease, or nobody yet): its rules, with the state of a group never evaluated here (health
// unknown, no alerts), since the holder's state is not known to this server.
func notHeld(g api.RuleGroup) api.RuleGroup {
	g.EvaluationTime, g.LastEvaluation = 0, time.Time{}
	rs := make([]api.Rule, len(g.Rules))
	for i, r := range g.Rules {
		r.Health, r.LastError, r.EvaluationTime, r.LastEvaluation, r.Alerts = string(rules.HealthUnknown), "", 0, time.Time{}, nil
		if r.Type == api.RuleAlerting {
			r.State = rules.StateInactive.String()
		}
		rs[i] = r
	}
	g.Rules = rs
	return g
}

// restoreQueryable is what Prometheus' own restore of the for state reads (after each
// group's second iteration of a Run): the database, or with leases nothing, since the
// leases restore a group when they take it (leases.restore) and Prometheus' restore, run
// again, would move a restored pending alert's active time.
func (m *Manager) restoreQueryable() storage.Queryable {
	if m.leases == nil {
		return m.opts.Queryable
	}
	return storage.QueryableFunc(func(int64, int64) (storage.Querier, error) { return storage.NoopQuerier(), nil })
}

// releaseRemoved releases the leases of the groups a reload removed, for the servers that
// still have them. Called with m.mu held, the reload's groups running.
func (m *Manager) releaseRemoved() {
	if m.leases == nil || m.rm == nil {
		return
	}
	keys := map[string]bool{}
	for _, g := range m.rm.RuleGroups() {
		keys[rules.GroupKey(g.File(), g.Name())] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.leases.release(ctx, func(key string) bool { return keys[key] })
}
