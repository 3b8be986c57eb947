// Package lease is the leases of a database's background work, entities of its catalog
// (docs/format.md, "The catalog"): one process at a time does a task, the one holding the
// task's lease, taken and renewed conditionally on the entity's ETag. The fold needs one
// to be right (two folds at once could write an old value over a newer one); compaction and
// rollups take one so that several servers on one database do not each do the same work at
// once (their writes are conditional and idempotent: two at once only cost requests, but
// on the account's one partition server, or on Azurite's one thread, as many times the
// requests as servers, and their conflicts).
//
// A lease lasts its term from the holder's last write, by the holder's clock (the DB's
// Options.Now); a holder stops writing its margin before the end, so that a write it starts
// ends before another process may take the lease.
package lease

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
)

// The lease entity: its PartitionKey is the task's, its RowKey RowKey.
const (
	RowKey      = "lease"
	untilProp   = "U" // Edm.Double: Unix milliseconds the lease ends at (the holder's clock)
	holderProp  = "H" // Edm.String: the holder's id
	errorPrefix = "tsdb: "
)

// Kind is a task's lease: its PartitionKey, term and margin, and the errors a Lease of it
// gives.
type Kind struct {
	// PartitionKey is the task's (fold, compact, rollup).
	PartitionKey string
	// Term is how long a lease lasts unless renewed; Margin how long before its end the
	// holder stops writing (Check).
	Term, Margin time.Duration
	// Busy is Take's error while another process holds the lease; Lost Keep's and Check's
	// once it ended or another took it.
	Busy, Lost error
}

// Lease is a held lease. Its methods are safe for concurrent use by the task's workers.
type Lease struct {
	kind   Kind
	now    func() time.Time
	client *aztables.Client
	holder string

	mu    sync.Mutex // guards etag and until, which renewals change
	etag  azcore.ETag
	until time.Time
}

// Take takes kind's lease in the catalog client for holder, or returns kind.Busy while
// another holds it. now is the clock leases are measured by. holder is an id unique to the
// take, or to a process that takes the lease once at a time (Do's keepFor): a lease that
// holder holds still, kept after an earlier Do, is taken again.
func Take(ctx context.Context, client *aztables.Client, kind Kind, holder string, now func() time.Time) (*Lease, error) {
	l := &Lease{kind: kind, now: now, client: client, holder: holder}
	e, etag, err := l.read(ctx)
	switch {
	case err != nil:
		return nil, err
	case e == nil:
		return l, l.write(ctx, true)
	}
	held := false
	for _, p := range e.Props {
		if string(p.Name) == untilProp && now().Before(time.UnixMilli(int64(p.Value))) {
			held = true
		}
	}
	if held && !l.heldBy(e) {
		return nil, kind.Busy
	}
	l.etag = etag
	return l, l.write(ctx, false)
}

// read reads the lease entity, with its ETag: nil when there is none.
func (l *Lease) read(ctx context.Context) (*entity.Entity, azcore.ETag, error) {
	resp, err := l.client.GetEntity(ctx, l.kind.PartitionKey, RowKey, nil)
	switch {
	case azerr.IsStatus(err, http.StatusNotFound):
		return nil, "", nil
	case err != nil:
		return nil, "", l.errorf(err)
	}
	e := &entity.Entity{AllowStrings: true}
	if err := e.Decode(resp.Value); err != nil {
		return nil, "", l.errorf(err)
	}
	return e, resp.ETag, nil
}

func (l *Lease) errorf(err error) error {
	return fmt.Errorf("%s%s lease: %w", errorPrefix, l.kind.PartitionKey, err)
}

// write takes (or renews) the lease for its term from now, conditionally on the ETag read
// (or as new): a lease another process took meanwhile makes it Busy.
func (l *Lease) write(ctx context.Context, insert bool) error {
	until := l.now().Add(l.kind.Term)
	b := Body(l.kind.PartitionKey, l.holder, until)
	var etag azcore.ETag
	var err error
	if insert {
		var resp aztables.AddEntityResponse
		resp, err = l.client.AddEntity(ctx, b, nil)
		etag = resp.ETag
	} else {
		var resp aztables.UpdateEntityResponse
		resp, err = l.client.UpdateEntity(ctx, b, &aztables.UpdateEntityOptions{IfMatch: &l.etag, UpdateMode: aztables.UpdateModeReplace})
		etag = resp.ETag
	}
	if azerr.IsStatus(err, http.StatusConflict) || azerr.IsStatus(err, http.StatusPreconditionFailed) {
		// Our own write, retried after its reply was lost, conflicts with itself.
		return l.mine(ctx, until)
	}
	if err != nil {
		return l.errorf(err)
	}
	l.etag, l.until = etag, until
	return nil
}

// mine reads the lease after a conflict: held by this holder (the write that conflicted was
// applied, its reply lost), it is taken; else Busy.
func (l *Lease) mine(ctx context.Context, until time.Time) error {
	e, etag, err := l.read(ctx)
	switch {
	case err != nil:
		return err
	case e != nil && l.heldBy(e):
		l.etag, l.until = etag, until
		return nil
	}
	return l.kind.Busy
}

// heldBy reports whether the lease entity e names l's holder.
func (l *Lease) heldBy(e *entity.Entity) bool {
	for _, sp := range e.Strings {
		if string(sp.Name) == holderProp && string(sp.Value) == l.holder {
			return true
		}
	}
	return false
}

// Body is the lease entity of task partitionKey held by holder until until (docs/format.md).
func Body(partitionKey, holder string, until time.Time) []byte {
	b := entity.AppendKeys(nil, partitionKey, RowKey)
	b = entity.AppendDouble(b, untilProp, float64(until.UnixMilli()))
	b = entity.AppendStringProperty(b, holderProp, holder)
	return entity.AppendEnd(b)
}

// Check reports Lost unless the lease lasts long enough for another write (its margin).
func (l *Lease) Check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkLocked()
}

func (l *Lease) checkLocked() error {
	if l.now().After(l.until.Add(-l.kind.Margin)) {
		return l.kind.Lost
	}
	return nil
}

// Keep renews the lease once half its term has passed, then checks it (Check): a task may
// take longer than a term. A renewal that fails for want of the account leaves the lease as
// it was, to be tried again at the next call; one that finds the lease taken loses it.
func (l *Lease) Keep(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.now().After(l.until.Add(-l.kind.Term / 2)) {
		if err := l.renewLocked(ctx); errors.Is(err, l.kind.Lost) {
			return err
		}
	}
	return l.checkLocked()
}

// Renew extends the lease for its term from now.
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewLocked(ctx)
}

func (l *Lease) renewLocked(ctx context.Context) error {
	if err := l.write(ctx, false); errors.Is(err, l.kind.Busy) {
		return l.kind.Lost
	} else {
		return err
	}
}

// KeepFor renews the lease to end d from now rather than a term (best effort: a lease it
// cannot write ends by itself at its term): the holder's next take within d takes it again.
func (l *Lease) KeepFor(ctx context.Context, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	until := l.now().Add(d)
	b := Body(l.kind.PartitionKey, l.holder, until)
	resp, err := l.client.UpdateEntity(ctx, b, &aztables.UpdateEntityOptions{IfMatch: &l.etag, UpdateMode: aztables.UpdateModeReplace})
	if err == nil {
		l.etag, l.until = resp.ETag, until
	}
}

// Release ends the lease (best effort: it ends by itself anyway).
func (l *Lease) Release(ctx context.Context) {
	l.mu.Lock()
	etag := l.etag
	l.mu.Unlock()
	_, _ = l.client.DeleteEntity(ctx, l.kind.PartitionKey, RowKey, &aztables.DeleteEntityOptions{IfMatch: &etag})
}

// ReleaseHeld ends kind's lease if holder holds it, kept after its Do (keepFor): one read,
// and a delete conditional on the ETag read, so that a lease another process took since is
// left alone. It reports whether it ended one. A process that keeps a lease between its
// runs calls it when it stops, so that the others take the task over at once rather than
// keepFor after its last run; it must not run a Do of the lease meanwhile.
func ReleaseHeld(ctx context.Context, client *aztables.Client, kind Kind, holder string) (bool, error) {
	l := &Lease{kind: kind, client: client, holder: holder}
	e, etag, err := l.read(ctx)
	if err != nil || e == nil || !l.heldBy(e) {
		return false, err
	}
	_, err = client.DeleteEntity(ctx, kind.PartitionKey, RowKey, &aztables.DeleteEntityOptions{IfMatch: &etag})
	switch {
	case azerr.IsStatus(err, http.StatusNotFound):
		return true, nil // the delete's own retry, its first reply lost (only a holder deletes)
	case azerr.IsStatus(err, http.StatusPreconditionFailed):
		return false, nil // another process took it since
	case err != nil:
		return false, l.errorf(err)
	}
	return true, nil
}

// Do runs work holding kind's lease, taken for holder (kind.Busy, and no work, while
// another process holds it): it keeps the lease every keepEvery of the real clock (Keep)
// as work goes on, and releases it when work returns, or with keepFor above 0 keeps it
// keepFor longer (KeepFor), for holder's next Do: a holder that keeps a lease is one
// process's, which runs one Do of the lease at a time. A Do whose ctx ended (its process
// stopping) releases the lease, keepFor or not. Should the lease be lost, work's
// context is cancelled and Do returns kind.Lost (what work did is kept: a task under a lease
// of Do is one whose steps are each safe alone, such as compaction's and rollups'
// conditional writes).
func Do(ctx context.Context, client *aztables.Client, kind Kind, holder string, now func() time.Time, keepEvery, keepFor time.Duration,
	work func(context.Context) error) error {
	l, err := Take(ctx, client, kind, holder, now)
	if err != nil {
		return err
	}
	var lost bool
	defer func() {
		switch {
		case keepFor > 0 && !lost && ctx.Err() == nil:
			l.KeepFor(context.WithoutCancel(ctx), keepFor)
		default:
			l.Release(context.WithoutCancel(ctx))
		}
	}()
	workCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		t := time.NewTicker(keepEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := l.Keep(workCtx); errors.Is(err, kind.Lost) {
					cancel(err)
					return
				}
			}
		}
	}()
	err = work(workCtx)
	close(done)
	<-kept
	if cause := context.Cause(workCtx); errors.Is(cause, kind.Lost) {
		lost = true
		return cause
	}
	return err
}
