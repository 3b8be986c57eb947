// Package reqlimit bounds the requests a process has in flight to its storage account.
//
// Every tenant's database, query and background loop of a server reaches the account
// through one HTTP client. Without a bound, their fan-outs add up: four tenants' rollups
// (32 writes at once each) and two dozen queries (4 batches at once each, a request or two
// a batch) had over 200 requests in flight in the soak, each on a connection of its own
// with two goroutines, opened and closed again beyond the client's idle pool. A bound makes
// requests wait their turn, in arrival order, and keeps the connections few and reused.
//
// Requests have three classes, by their context. Ingest (remote write and OTLP, marked
// with Ingest) may take every slot; the others (queries, unmarked) hold at most three
// quarters of them; background work (folds, rollups, compactions, retention, marked with
// Background) at most half. A request of a limited class waits for its class's share
// before it joins the queue, so an ingest request waits behind at most three quarters of
// the limit of others. Measured in the soak (after a backfilled hour, 4 tenants of 18,750
// series): with one FIFO of every request, the rollups catching up and then the
// dashboards' queries filled it with 300 requests waiting, and remote writes were
// acknowledged at a tenth to a thirtieth of the rate Prometheus sent them; Prometheus backs
// up, then drops samples. A slow query is a slower panel.
//
// Background work also yields to queries: while a query's request is waiting or in flight
// (and for QuietPeriod after the last one), background requests hold at most
// BusyBackgroundLimit of the slots, an eighth. Measured with the rules at scale (1,000
// rules over 10,000 series on Azurite): with 32 rollup transactions in flight, each
// evaluation's dozen requests queued behind them at the account, and the evaluations lagged
// by up to 99 s; a request of a query should wait behind few background ones, wherever the
// account queues them. A background loop alone keeps its half.
//
// A background request weighs in its share by the bytes it sends: a slot for each
// BackgroundWeightBytes begun, up to the busy share. A rollup's transaction of tier blocks
// (up to 4 MB) holds the account (Azurite's one thread, or an Azure partition server) as
// long as a hundred of a fold's transactions, each a chunk or two: in the soak, eight of
// them in flight beside the dashboards made each query's point read of a change log wait
// 0.26 to 0.53 s, where the folds' small ones made it wait about 0.1 s. A slot a 256 KiB
// still let eight of the rollup's usual transactions in flight at once while queries ran
// (about 128 KiB each: 1,838 of them rewrote the 235 MB of tier blocks the rollup read),
// and in the rollup's minutes each point read waited 0.17 to 0.47 s (docs/soak.md, run
// 84). A slot a 32 KiB lets at most 256 KiB of background bodies in flight while queries
// run: two such transactions, or eight of a fold's; the reads then waited 0.11 s beside the
// rollup (run 85).
//
// A background request also weighs by what the last requests of its kind cost (the same
// task, method and table, the digits of tenants and periods left out of its name): the
// bytes they received, a slot a BackgroundWeightBytes as for a body, and the time they held
// their slot, a slot a BackgroundWeightTime. A read's cost is its answer, or the scan behind
// it: the account serializes a page, and filters every entity of a query across partitions,
// and Azurite does both on its one thread. A fold reads its staging entities a page of
// whole entities at a time, a rollup its tier blocks and raw chunks a page of up to 1,000;
// in the soak's fold minutes, with eight such pages in flight, Azurite was busy all the time
// with 40 to 60 requests a second, the server's CPU a quarter used, and the dashboards
// answered half their queries (run 105 of docs/soak.md, its 30th minute). Weighed by their
// answers, they went one at a time beside the queries (run 108), but a compaction's scans
// of a raw table, small answers after long filters, still made each query's point read wait
// 0.2 to 0.36 s for two minutes. Weighed by their time too, a request of a kind that took
// the account most of a second takes the whole busy share.
package reqlimit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/seed71701133/tablets/internal/gate"
)

// Transport is a policy.Transporter that lets at most its limit of requests through to
// next at once; the others wait in arrival order, until their context ends. A request
// holds its slot until its response body is read to the end or closed (the connection is
// busy until then), or until next fails. Requests not marked Ingest hold at most
// OthersLimit of the slots, those marked Background at most BackgroundLimit. It is safe
// for concurrent use.
type Transport struct {
	next policy.Transporter
	gate *gate.Gate
	// others is the share of the requests not marked Ingest, background the share of those
	// marked Background; a request takes its shares before gate.
	others, background *gate.Gate
	// idleBackground and busyBackground are the background share's sizes without queries
	// and with them.
	idleBackground, busyBackground int64

	// sent and held count, by class, the requests that took a slot and the nanoseconds
	// they held it (Classes).
	sent, held [classes]atomic.Int64
	// pointReads are the histograms of the point reads' times, whole and by phase
	// (pointreads.go).
	pointReads pointReads

	// answers are what the background requests of each kind (answerKind) cost of late: a
	// moving average, which weighs the next request of the kind.
	answersMu sync.Mutex
	answers   map[string]answerCost

	mu sync.Mutex
	// queries are the requests of queries (unmarked) waiting or in flight; busy is whether
	// the background share is busyBackground; lastQuery is when the last query's request
	// ended; idleTimer, if set, is to restore idleBackground after the quiet period.
	queries   int
	busy      bool
	lastQuery time.Time
	idleTimer *time.Timer
}

// QuietPeriod is how long after the last request of a query background requests keep to
// their busy share: a query's requests come one after another, with gaps between.
const QuietPeriod = 2 * time.Second

// New returns a Transport over next admitting limit requests at once (limit < 1 means 1).
func New(next policy.Transporter, limit int) *Transport {
	limit = max(limit, 1)
	return &Transport{next: next, gate: gate.New(int64(limit)),
		others: gate.New(int64(OthersLimit(limit))), background: gate.New(int64(BackgroundLimit(limit))),
		idleBackground: int64(BackgroundLimit(limit)), busyBackground: int64(BusyBackgroundLimit(limit))}
}

// OthersLimit is the share of limit slots that requests not marked Ingest may hold:
// three quarters (all of them under 4).
func OthersLimit(limit int) int { return max(limit-limit/4, 1) }

// BackgroundLimit is the share of limit slots that background requests may hold: half,
// at least one.
func BackgroundLimit(limit int) int { return max(limit/2, 1) }

// BusyBackgroundLimit is the share of limit slots that background requests may hold while
// queries are waiting or in flight: an eighth, at least one.
func BusyBackgroundLimit(limit int) int { return max(limit/8, 1) }

// BackgroundWeightBytes is the bytes a background request sends for each slot of its share
// it takes (package doc).
const BackgroundWeightBytes = 32 << 10

// backgroundWeight is the slots of the background share req takes, the most of: one for
// each BackgroundWeightBytes begun of its body, or of the answer its kind of request
// (answerKind) is expected to receive; and one, and one more for each whole
// BackgroundWeightTime its kind is expected to hold its slot. At most the busy share.
func (t *Transport) backgroundWeight(req *http.Request) int64 {
	cost := t.expectedCost(answerKind(req))
	bytes := max(req.ContentLength, cost.bytes)
	w := max(1+max(bytes-1, 0)/BackgroundWeightBytes, 1+int64(cost.held/BackgroundWeightTime))
	return min(w, t.busyBackground)
}

// BackgroundWeightTime is the time the requests of a background request's kind held their
// slot for each slot of its share it takes, beyond the first (package doc): while queries
// run, at most 8 of tablets serve's 64 slots, a kind that takes 0.8 s goes one at a time.
const BackgroundWeightTime = 100 * time.Millisecond

// answerCost is what the requests of a kind cost: the bytes they received, and how long they
// held their slot, from sending until the body was read or closed.
type answerCost struct {
	bytes int64
	held  time.Duration
}

// maxAnswerKinds bounds the kinds of background requests whose costs a Transport keeps:
// more (many tenants' tables) start the count over.
const maxAnswerKinds = 1024

// answerKind is what a background request's answer is expected to be like: its task
// (WithTask), method and table, the digits of the table's name left out (a tenant's, a
// period's) and what follows it (keys, a filter).
func answerKind(req *http.Request) string {
	name := req.URL.Path[strings.LastIndexByte(req.URL.Path, '/')+1:]
	if i := strings.IndexByte(name, '('); i >= 0 {
		name = name[:i]
	}
	name = strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, name)
	return TaskOf(req.Context()) + " " + req.Method + " " + name
}

// expectedCost is what a background request of kind is expected to cost: the moving
// average of those of its kind (zero: none yet).
func (t *Transport) expectedCost(kind string) answerCost {
	t.answersMu.Lock()
	defer t.answersMu.Unlock()
	return t.answers[kind]
}

// answered counts what a background request of kind cost in its moving average: a quarter
// of the new, three quarters of the old, so that one large page among small ones weighs the
// next requests but does not set them.
func (t *Transport) answered(kind string, c answerCost) {
	t.answersMu.Lock()
	defer t.answersMu.Unlock()
	old, ok := t.answers[kind]
	if !ok {
		if t.answers == nil || len(t.answers) >= maxAnswerKinds {
			t.answers = map[string]answerCost{}
		}
		t.answers[kind] = c
		return
	}
	t.answers[kind] = answerCost{bytes: (3*old.bytes + c.bytes) / 4, held: (3*old.held + c.held) / 4}
}

// queryBegan counts a query's request; the first makes the background share its busy size
// (slots taken stay taken: background requests wait until they are under it).
func (t *Transport) queryBegan() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queries++
	if !t.busy {
		t.busy = true
		t.background.Resize(t.busyBackground)
	}
}

// queryEnded counts a query's request done; after the last, the background share is back
// to its idle size once QuietPeriod passes without another.
func (t *Transport) queryEnded() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queries--
	if t.queries > 0 {
		return
	}
	t.lastQuery = time.Now()
	if t.idleTimer == nil {
		t.idleTimer = time.AfterFunc(QuietPeriod, t.maybeIdle)
	}
}

// maybeIdle restores the idle background share if no query's request came since
// QuietPeriod ago, and else looks again when the period after the last one ends.
func (t *Transport) maybeIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.idleTimer = nil
	if t.queries > 0 || !t.busy {
		return // the last query's end schedules the next look
	}
	if wait := QuietPeriod - time.Since(t.lastQuery); wait > 0 {
		t.idleTimer = time.AfterFunc(wait, t.maybeIdle)
		return
	}
	t.busy = false
	t.background.Resize(t.idleBackground)
}

type classKey struct{}

type class int

const (
	classOther class = iota
	classIngest
	classBackground
	classes // how many
)

// classNames are the classes' names in Classes.
var classNames = [classes]string{classOther: "query", classIngest: "ingest", classBackground: "background"}

// ClassStats are what one class of requests took of the account: the requests sent, and the
// time they held a slot (from sending until their response body was read or closed).
type ClassStats struct {
	Class    string // "ingest", "query" (every unmarked request) or "background"
	Requests int64
	Held     time.Duration
}

// Classes returns each class's requests and slot time since the Transport was made: which
// of the writes, the queries and the background work the account's time went to.
func (t *Transport) Classes() []ClassStats {
	out := make([]ClassStats, classes)
	for c := range classes {
		out[c] = ClassStats{Class: classNames[c], Requests: t.sent[c].Load(), Held: time.Duration(t.held[c].Load())}
	}
	return out
}

// Ingest marks ctx's requests as ingest (remote write, OTLP): they may take every slot.
func Ingest(ctx context.Context) context.Context {
	return context.WithValue(ctx, classKey{}, classIngest)
}

// Background marks ctx's requests as background work: they take a slot only within the
// background share.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, classKey{}, classBackground)
}

type taskKey struct{}

// WithTask names the background task whose requests ctx's are (a fold, a rollup...), for
// the metrics that count them by task; it changes nothing of their class or share.
func WithTask(ctx context.Context, task string) context.Context {
	return context.WithValue(ctx, taskKey{}, task)
}

// TaskOf is the task WithTask named for ctx ("" if none).
func TaskOf(ctx context.Context) string {
	t, _ := ctx.Value(taskKey{}).(string)
	return t
}

// IsIngest reports whether ctx is marked Ingest (and not Background since).
func IsIngest(ctx context.Context) bool { return classOf(ctx) == classIngest }

// IsBackground reports whether ctx is marked Background (and not Ingest since).
func IsBackground(ctx context.Context) bool { return classOf(ctx) == classBackground }

func classOf(ctx context.Context) class {
	c, _ := ctx.Value(classKey{}).(class)
	return c
}

// Do waits for a slot, then sends req through next. A request whose context ends while it
// waits gets the context's error and is never sent.
func (t *Transport) Do(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	tally, asked := tallyOf(ctx), time.Now()
	var shares []*gate.Gate      // taken, to give back with the slot
	weights := [3]int64{1, 1, 1} // of each share, then the slot
	c := classOf(ctx)
	var kind string // of a background request's answer
	switch c {
	case classBackground:
		shares = []*gate.Gate{t.background, t.others}
		weights[0] = t.backgroundWeight(req)
		kind = answerKind(req)
	case classOther:
		shares = []*gate.Gate{t.others}
		t.queryBegan()
	}
	release := func(taken []*gate.Gate) { // once a request, whatever its end
		for i, g := range taken {
			g.Release(weights[i])
		}
		if c == classOther {
			t.queryEnded()
		}
	}
	for i, g := range shares {
		took, err := g.Acquire(ctx, weights[i])
		if err != nil {
			release(shares[:i])
			return nil, err
		}
		weights[i] = took
	}
	if _, err := t.gate.Acquire(ctx, 1); err != nil {
		release(shares)
		return nil, err
	}
	taken := append(shares, t.gate)
	t.sent[c].Add(1)
	began := time.Now()
	tally.slotTaken(began.Sub(asked))
	var phases *phaseTimes // of a point read
	if isPointRead(req) {
		phases = &phaseTimes{}
		req = req.WithContext(httptrace.WithClientTrace(ctx, phases.trace()))
	}
	var body *releasingBody // of a response with one
	done := func() {
		took := time.Since(began)
		t.held[c].Add(int64(took))
		var received int64
		if body != nil {
			received = body.read
		}
		tally.released(func() string { return strings.TrimSpace(answerKind(req)) }, took, received)
		if phases != nil {
			t.pointReads.observe(took, phases.split(began, time.Now()))
		}
		release(taken)
	}
	resp, err := t.next.Do(req)
	if err != nil || resp == nil || resp.Body == nil {
		done()
		return resp, err
	}
	body = &releasingBody{ReadCloser: resp.Body, release: done}
	if c == classBackground {
		body.release = func() {
			t.answered(kind, answerCost{bytes: body.read, held: time.Since(began)})
			done()
		}
	}
	resp.Body = body
	return resp, nil
}

// State returns the requests in flight and those waiting for a slot (or for the
// background share).
func (t *Transport) State() (inFlight, waiting int) {
	used, w := t.gate.State()
	_, ow := t.others.State()
	_, bw := t.background.State()
	return int(used), w + ow + bw
}

// releasingBody gives its request's slot back, once, at the end of the body or on Close.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
	read    int64 // the bytes read of it
}

func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if err != nil {
		b.once.Do(b.release)
	}
	return n, err
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
