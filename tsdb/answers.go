package tsdb

import (
	"context"
	"time"

	"github.com/seed71701133/tablets/tsdb/internal/answers"
)

// Kept answers: the answers of queries a process computed, kept in the database (its table
// name + "q") for every process sharing it, as Mimir's and Thanos' query-frontends keep
// theirs in a cache their replicas share. A server behind a load balancer then computes
// only the newest steps of a panel another server answered, and a server just started
// those of the panels any server answered before. An answer keeps the read mark of the
// samples it was computed from, and serves only while a mark taken later holds it
// (ReadMark.Holds), whichever process changed the database since: the account stays the
// only truth, and a kept answer is never the last word.

// AnswerLife is how long a kept answer no process wrote again stays: Retain deletes those
// older (the answers of panels nobody looks at any more).
const AnswerLife = 24 * time.Hour

// ErrAnswerTooLarge is the error of KeepAnswer for an answer whose encoding, or whose key,
// is over what one entity keeps (704 KiB, and 4 KiB of key), before any request.
var ErrAnswerTooLarge = answers.ErrTooLarge

// Answers is the part of a database that keeps answers of queries (DB.Answers): one
// entity a key in the table of kept answers, read back by any process.
type Answers struct {
	table  *answers.Table
	period time.Duration // the database's raw period, which a kept mark's reader needs
}

// Answers returns the database's kept answers.
func (db *DB) Answers() *Answers { return &Answers{table: db.answers, period: db.names.Period} }

// Keep keeps a in the database under key (any string of at most 4 KiB: the query and
// what else its answer depends on), replacing what the key kept: one request. A's marks
// must be of this database, taken by ReadMark (or their Subs); the answer is later used
// only while a mark holds them (see Kept).
func (an *Answers) Keep(ctx context.Context, key string, a KeptAnswer) error {
	b, err := appendAnswer(nil, a)
	if err != nil {
		return err
	}
	return an.table.Put(ctx, key, b)
}

// Kept reads the answer kept under key: one request; ok false when there is none (or
// it was kept by a newer program, in a format this one does not read). Its marks are as
// they were when it was kept: use its steps only while a mark taken now holds them (the
// later mark's Holds), as with an answer of this process.
func (an *Answers) Kept(ctx context.Context, key string) (a KeptAnswer, ok bool, err error) {
	b, _, found, err := an.table.Get(ctx, key)
	if err != nil || !found {
		return KeptAnswer{}, false, err
	}
	if a, err = decodeAnswer(b, an.period); err != nil {
		return KeptAnswer{}, false, nil // a newer program's, or damaged: none
	}
	return a, true, nil
}

// Expire deletes the kept answers no process wrote in the AnswerLife before now, and
// returns how many: one query of the answers' keys and times, and a request an answer.
// Another process may run it at the same time: an answer written again meanwhile stays.
func (an *Answers) Expire(ctx context.Context, now time.Time) (int, error) {
	return an.table.Expire(ctx, now.Add(-AnswerLife))
}
