package server

import (
	"context"
	"fmt"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/gate"
)

// DefaultMaxBackgroundJobs is the background jobs a [Tenants] front runs at once, all tenants
// together (see [Jobs]).
const DefaultMaxBackgroundJobs = 4

// Jobs bounds the background jobs that run at once in the servers sharing it: a job is one
// call of a loop's task (a fold, a slice of a rollup or a compaction, a rollup of flagged
// slices, a retention pass); more wait their turn, in arrival order. Each job sends up to
// tens of requests at once, and every tenant's loops start on the same interval
// boundaries: without a bound the tenants' folds and rollups of a bucket boundary all run
// together, and their points, their goroutines and their queue for the account grow with
// the number of tenants. Run's loops take turns instead; a job waiting for its turn holds
// nothing. Folds go ahead of the other waiting jobs, and of n slots the other jobs take at
// most n-1 and the folds at most half, rounded up (see doFirst). A nil *Jobs bounds nothing.
type Jobs struct {
	gate   *gate.Gate // all jobs: n
	others *gate.Gate // the jobs of do: n-1, or 1 if n is 1
	folds  *gate.Gate // the jobs of doFirst: n/2 rounded up
}

// NewJobs returns a bound of n jobs at once; n must be positive.
func NewJobs(n int) (*Jobs, error) {
	if n <= 0 {
		return nil, fmt.Errorf("server: %w: %d background jobs at once", tablets.ErrInvalidOptions, n)
	}
	return &Jobs{gate: gate.New(int64(n)), others: gate.New(int64(max(n-1, 1))), folds: gate.New(int64((n + 1) / 2))}, nil
}

// State returns the jobs running and the jobs waiting for their turn.
func (j *Jobs) State() (running, waiting int) {
	if j == nil {
		return 0, 0
	}
	used, waiting := j.gate.State()
	_, waitingOthers := j.others.State()
	_, waitingFolds := j.folds.State()
	return int(used), waiting + waitingOthers + waitingFolds
}

// do runs job once its turn comes, or returns ctx's error if ctx ends first.
func (j *Jobs) do(ctx context.Context, job func() error) error {
	return j.run(ctx, false, job)
}

// doFirst is do ahead of every job waiting in do (behind the others of doFirst), with a
// slot that jobs of do never take (when there are two or more). The folds take it: until a
// fold, every query of recent points reads the staging table and holds what it read. In
// the soak, the rollups catching up on a backfilled hour kept 21 jobs waiting for 20
// minutes, and the staging table grew through the run unfolded; going first was not
// enough either, as the 4 rollup slices running took many minutes each on Azurite.
//
// Yet folds take at most half the slots: every tenant's staging bucket ends at once, and a
// fold holds up to a round of points (maxFoldPoints) and sends with 32 goroutines. In soak
// run 11 the 4 tenants' folds of a bucket ran together: their rounds were 44 MB of the
// heap's growth, and their writers up to 128 goroutines.
func (j *Jobs) doFirst(ctx context.Context, job func() error) error {
	return j.run(ctx, true, job)
}

func (j *Jobs) run(ctx context.Context, first bool, job func() error) error {
	if j == nil {
		return job()
	}
	acquire := j.gate.AcquireFirst
	if first {
		n, err := j.folds.Acquire(ctx, 1)
		if err != nil {
			return err
		}
		defer j.folds.Release(n)
	} else {
		// A slot of the others' n-1 first: holding it while waiting for one of the n
		// leaves a slot to a fold, which gives it back.
		n, err := j.others.Acquire(ctx, 1)
		if err != nil {
			return err
		}
		defer j.others.Release(n)
		acquire = j.gate.Acquire
	}
	n, err := acquire(ctx, 1)
	if err != nil {
		return err
	}
	defer j.gate.Release(n)
	return job()
}
