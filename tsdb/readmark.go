package tsdb

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// A ReadMark is what the samples of a range of a database were when it was taken: the
// staging entities that may hold some (their keys and ETags) and the raw change log of each
// period of the range. It lets a cache of answers computed from the range (a query
// result cache) keep one only while it still stands, whichever process changed the
// database: take a mark before reading, and take one again before using what was read;
// Holds says whether any change between them touched the range.
//
// Every change of what a read of raw samples answers shows in one of them: a staged write
// (a new entity), a direct write, a Delete and Retain (they record in the raw log). A Fold
// changes both (its entities leave the staging table, and it records in the raw log) but
// not what a read answers: a mark still holds across Folds whose receipts name exactly the
// entities that left (see Holds). New series without samples in the range change nothing a
// read of it answers, nor do a rollup or a compaction. A read that serves tiers where raw
// samples exist (QueryOptions.MaxResolution above RawResolution) may answer otherwise as
// the rollup goes on: its answers are approximate, and a mark says nothing of them.
type ReadMark struct {
	from, to time.Time
	taken    bool                       // by DB.ReadMark (not Sub): it has the listing
	unknown  bool                       // a Sub of a Sub over another range: no listing to sum it
	staged   staging.Listing            // when taken
	sum      staging.Sum                // of the range
	periods  map[uint64]changelog.State // by raw period (its start in Unix seconds)
	period   time.Duration              // Options.RawPeriod
	// moved gives the entities a Fold's receipt names, as the staging listings knew them
	// (staging.Table.Moved): of a mark DB.ReadMark took.
	moved func(changelog.Receipt) (staging.Listing, bool)
}

// ReadMark takes a mark of [from, to): one listing of the staging entities' keys, and the
// raw change log of each period of the range. It is cheap: a few hundred bytes an entity
// staged in the range, and a point read of the log of each period, all at once (with the
// index log's, for the Selects of a read that began: changelog.StatesTogether), whose
// states reads share.
//
// The logs are read beside the listing, for a read that began (BeginRead) while no Fold
// began deleting staging entities since a listing before it (staging.Listing.LogAfter).
// Else the raw log is read again after the listing: a Fold that deleted entities the
// listing missed recorded there before.
//
// And while the listings find the staging table's logs' mark as it was (no change was
// recorded in the logs since: staging.Table.LogsStill), the states read before serve: a
// refreshed panel's mark is its listing alone. The index log's states wait for the
// listing, which vouches for them (staging.Table.VouchFor); when it found the mark
// changed, both logs are read after it.
func (db *DB) ReadMark(ctx context.Context, from, to time.Time) (ReadMark, error) {
	return db.readMark(ctx, from, to, true)
}

// PrepareRead is ReadMark for a read that keeps no mark (an instant query's): the staging
// listing and the change logs' states its Selects take, read as ReadMark reads them,
// without the listing's entities of the range (their selection and their Sum).
func (db *DB) PrepareRead(ctx context.Context, from, to time.Time) error {
	_, err := db.readMark(ctx, from, to, false)
	return err
}

// readMark is ReadMark, or PrepareRead without keep (its mark then empty).
func (db *DB) readMark(ctx context.Context, from, to time.Time, keep bool) (ReadMark, error) {
	if err := rounding.CheckRange(from, to); err != nil {
		return ReadMark{}, err
	}
	rawWants := rawLogWants(db, from, to)
	// The index log's states of the periods too, which the Selects after the mark take:
	// every period's of both logs read at once (a 7-day panel's range spans two periods).
	type statesRead struct {
		wants  []changelog.Want
		states []changelog.State
		err    error
	}
	began, beside := db.staging.ReadBegan(ctx)
	need := began
	still := db.staging.LogsStill()
	vouched := beside && still != 0 && still <= began // the states read since still may serve
	if vouched {
		need = still
	}
	reads := make(chan statesRead, 1)
	go func() {
		wants := slices.Clip(rawWants)
		if !vouched {
			wants = append(wants, db.index.LogWants(ctx, from, to)...)
		}
		if !beside {
			reads <- statesRead{wants: wants}
			return
		}
		states, err := changelog.StatesTogether(changelog.AfterRead(ctx, need), wants)
		reads <- statesRead{wants, states, err}
	}()
	var listed staging.Listing
	var err error
	if keep {
		listed, err = db.staging.List(ctx, from, to)
	} else {
		listed, err = db.staging.Refresh(ctx)
	}
	if err != nil {
		return ReadMark{}, err
	}
	var m ReadMark
	if keep {
		m = ReadMark{from: from, to: to, taken: true, staged: listed, sum: listed.Sum(from, to),
			periods: map[uint64]changelog.State{}, period: db.names.Period, moved: db.staging.Moved}
	}
	r := <-reads
	switch {
	case !beside || listed.LogAfter() > need || r.err != nil:
		// After the listing (its own count: List counts as a read of staged samples).
		if vouched {
			r.wants = append(r.wants, db.index.LogWants(ctx, from, to)...)
		}
		r.states, r.err = changelog.StatesTogether(ctx, r.wants)
	case vouched:
		// The index log's for the Selects: as the listing vouched for them, or read.
		_, _ = changelog.StatesTogether(ctx, db.index.LogWants(ctx, from, to))
	}
	if r.err != nil {
		return ReadMark{}, fmt.Errorf("tsdb: read mark: %w", r.err)
	}
	if keep {
		for i, w := range rawWants {
			m.periods[w.Period] = r.states[i]
		}
	}
	return m, nil
}

// rawLogWants are the raw change log's periods of [from, to), as wants.
func rawLogWants(db *DB, from, to time.Time) []changelog.Want {
	var wants []changelog.Want
	for p := db.names.PeriodOf(from); db.names.Start(p).Before(to); p = db.names.PeriodOf(db.names.End(p)) {
		wants = append(wants, changelog.Want{Log: db.changes, Period: p})
	}
	return wants
}

// BeginRead returns the context of a read of the database that begins now and is made of
// several (a query: its read mark, then its Selects): each of them may take, instead of
// reading its own, the staging listing and the change logs' states read after the read
// began, so that a refreshed panel's mark and Selects list the staging table once and read
// each log once. What they find was in the database after BeginRead was called, as if read
// then: a change before it shows in all of them. A context that began already is returned
// as is.
func (db *DB) BeginRead(ctx context.Context) context.Context {
	// The log's first: a listing's refresh that serves the read then began after it, and
	// vouches for the index log's states as of a later epoch (staging.Table.VouchFor).
	return db.staging.BeginRead(changelog.Begin(ctx))
}

// Range is the range of times the mark is of.
func (m ReadMark) Range() (from, to time.Time) { return m.from, m.to }

// Sub is the mark of [from, to), a range within m's, as if taken when m was: a cache
// keeps the marks of the parts of a range it took one mark of. A Sub of a Sub has no
// listing to sum but over its own range: over another, it holds nothing later.
func (m ReadMark) Sub(from, to time.Time) ReadMark {
	from, to = times.Later(from, m.from), times.Earlier(to, m.to)
	to = times.Later(from, to)
	s := ReadMark{from: from, to: to, sum: m.staged.Sum(from, to), periods: map[uint64]changelog.State{}, period: m.period}
	if !m.taken {
		s.sum, s.unknown = m.sum, m.unknown || !from.Equal(m.from) || !to.Equal(m.to)
	}
	for p, st := range m.periods {
		if start := time.Unix(int64(p), 0); start.Before(to) && start.Add(m.period).After(from) {
			s.periods[p] = st
		}
	}
	return s
}

// Holds reports whether what a read of since's range found when since was taken still
// stands when m was (m later, of a range holding since's): the same staging entities
// of the range at the same ETags, and no change recorded in a period's raw log after since
// that overlaps the range; or, where m was taken by DB.ReadMark, only Folds whose receipts
// this process matched to the entities they moved (staging.Table.Moved), and since's
// entities are m's with those. A Fold moves staged samples into the raw tables as a read
// of both answered them (the last write of a millisecond, periods known dropped left out),
// so that what was read still stands: a refreshed panel's cached steps outlive every Fold
// (each Fold spoilt every extent overlapping its bucket, and the panels computed their
// whole range again at once, in the soak beside the Fold and the rollup). A mark of
// another range, or one whose logs no longer record every change after since (more than
// changelog.Kept), does not hold.
func (m ReadMark) Holds(since ReadMark) bool {
	var sum staging.Sum
	switch {
	case since.unknown || m.unknown || since.from.Before(m.from) || since.to.After(m.to):
		return false
	case m.taken:
		sum = m.staged.Sum(since.from, since.to)
	case m.from.Equal(since.from) && m.to.Equal(since.to):
		sum = m.sum
	default:
		return false // a Sub mark has no listing to sum another range of
	}
	from, to := since.from.UnixMilli(), staging.EarliestMilli(since.to)
	var folds []changelog.Receipt // the changes of the range since: Folds'
	for p, was := range since.periods {
		now, ok := m.periods[p]
		if !ok {
			return false
		}
		if now.ValidUntil(was.Gen(), from, to) >= to {
			continue
		}
		receipts, ok := now.Folds(was.Gen(), from, to)
		if !ok || !m.taken || m.moved == nil {
			return false // another change, or one this mark cannot check
		}
		folds = append(folds, receipts...)
	}
	if len(folds) == 0 {
		return sum == since.sum
	}
	moved := make([]staging.Listing, 0, len(folds))
	for _, r := range folds {
		l, ok := m.moved(r)
		if !ok {
			return false
		}
		moved = append(moved, l)
	}
	return m.staged.SumWith(moved, since.from, since.to) == since.sum
}
