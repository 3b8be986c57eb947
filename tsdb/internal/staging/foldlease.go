package staging

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/priority"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/sentinel"
)

// One Fold at a time folds a database: the one holding the fold lease, an entity of the
// catalog taken and renewed conditionally on its ETag. Two folds at once would each be
// right on their own, but a fold that read some staging entities while another deleted
// others could write an old value of a time with the priority of a newer entity it also
// read, over the newer value the other wrote.
const (
	// FoldLeaseTerm is how long a lease lasts unless renewed (between rounds, and once half
	// of it has passed: see keep).
	FoldLeaseTerm = 5 * time.Minute
	// foldLeaseMargin: a holder stops writing this long before its lease ends, so that a
	// write it starts ends before another process may take the lease.
	foldLeaseMargin = 90 * time.Second
	// FoldLeasePK and foldLeaseRK are the keys of the lease entity in the catalog.
	FoldLeasePK     = "fold"
	foldLeaseRK     = "lease"
	foldLeaseUntil  = "U" // Edm.Double: Unix milliseconds the lease ends at (the holder's clock)
	foldLeaseHolder = "H" // Edm.String: the holder's id
)

// ErrFoldLeaseLost: the lease ended or was taken before the fold was done.
var ErrFoldLeaseLost = errors.New("tsdb: the fold lease ended before the fold was done")

// foldLease is a held lease. Its methods are safe for concurrent use by a fold's writers.
type foldLease struct {
	mu     sync.Mutex       // guards etag and until, which renewals change
	now    func() time.Time // Options.Now
	client *aztables.Client
	holder string
	etag   azcore.ETag
	until  time.Time
}

// takeLease takes the fold lease, or returns ErrFoldBusy while another holds it. Leases
// are measured by Options.Now, like everything time-dependent in a DB. The holder is this
// handle's writer id (its staging entities') and a stamp.
func (f *Folder) takeLease(ctx context.Context) (*foldLease, error) {
	l := &foldLease{now: f.now, client: f.catalog, holder: strconv.FormatUint(uint64(f.staging.writer), 16) + "-" + strconv.FormatUint(priority.Next(), 16)}
	resp, err := l.client.GetEntity(ctx, FoldLeasePK, foldLeaseRK, nil)
	switch {
	case azerr.IsStatus(err, http.StatusNotFound):
		return l, l.write(ctx, true)
	case err != nil:
		return nil, fmt.Errorf("tsdb: fold lease: %w", err)
	}
	var e entity.Entity
	e.AllowStrings = true
	if err := e.Decode(resp.Value); err != nil {
		return nil, fmt.Errorf("tsdb: fold lease: %w", err)
	}
	for _, p := range e.Props {
		if string(p.Name) == foldLeaseUntil && l.now().Before(time.UnixMilli(int64(p.Value))) {
			return nil, sentinel.ErrFoldBusy
		}
	}
	l.etag = resp.ETag
	return l, l.write(ctx, false)
}

// write takes (or renews) the lease for FoldLeaseTerm from now, conditionally on the ETag
// read (or as new): a lease another process took meanwhile makes it ErrFoldBusy.
func (l *foldLease) write(ctx context.Context, insert bool) error {
	until := l.now().Add(FoldLeaseTerm)
	b := l.body(until)
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
		return fmt.Errorf("tsdb: fold lease: %w", err)
	}
	l.etag, l.until = etag, until
	return nil
}

// mine reads the lease after a conflict: held by this holder (the write that conflicted was
// applied, its reply lost), it is taken; else ErrFoldBusy.
func (l *foldLease) mine(ctx context.Context, until time.Time) error {
	resp, err := l.client.GetEntity(ctx, FoldLeasePK, foldLeaseRK, nil)
	if azerr.IsStatus(err, http.StatusNotFound) {
		return sentinel.ErrFoldBusy
	}
	if err != nil {
		return fmt.Errorf("tsdb: fold lease: %w", err)
	}
	var e entity.Entity
	e.AllowStrings = true
	if err := e.Decode(resp.Value); err != nil {
		return fmt.Errorf("tsdb: fold lease: %w", err)
	}
	for _, sp := range e.Strings {
		if string(sp.Name) == foldLeaseHolder && string(sp.Value) == l.holder {
			l.etag, l.until = resp.ETag, until
			return nil
		}
	}
	return sentinel.ErrFoldBusy
}

// body is the lease entity, ending at until.
func (l *foldLease) body(until time.Time) []byte { return FoldLeaseBody(l.holder, until) }

// FoldLeaseBody is the fold lease entity of holder, ending at until (docs/format.md).
func FoldLeaseBody(holder string, until time.Time) []byte {
	b := entity.AppendKeys(nil, FoldLeasePK, foldLeaseRK)
	b = entity.AppendDouble(b, foldLeaseUntil, float64(until.UnixMilli()))
	b = entity.AppendStringProperty(b, foldLeaseHolder, holder)
	return entity.AppendEnd(b)
}

// checkLocked reports ErrFoldLeaseLost unless the lease lasts long enough for another
// write. Called with mu held.
func (l *foldLease) checkLocked() error {
	if l.now().After(l.until.Add(-foldLeaseMargin)) {
		return ErrFoldLeaseLost
	}
	return nil
}

// keep renews the lease once half its term has passed, then checks it: a round of a large
// staging table (the hour a backfill wrote, read and written while queries share the
// account) may take longer than a term. In soak run 10 every fold of the backfilled hour
// failed this way, again and again, and the staging table grew through the run. A renewal
// that fails for want of the account leaves the lease as it was, to be tried again at the
// next call; one that finds the lease taken loses it.
func (l *foldLease) keep(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.now().After(l.until.Add(-FoldLeaseTerm / 2)) {
		if err := l.renewLocked(ctx); errors.Is(err, ErrFoldLeaseLost) {
			return err
		}
	}
	return l.checkLocked()
}

// renew extends the lease.
func (l *foldLease) renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewLocked(ctx)
}

func (l *foldLease) renewLocked(ctx context.Context) error {
	if err := l.write(ctx, false); errors.Is(err, sentinel.ErrFoldBusy) {
		return ErrFoldLeaseLost
	} else {
		return err
	}
}

// release ends the lease (best effort: it ends by itself anyway).
func (l *foldLease) release(ctx context.Context) {
	l.mu.Lock()
	etag := l.etag
	l.mu.Unlock()
	_, _ = l.client.DeleteEntity(ctx, FoldLeasePK, foldLeaseRK, &aztables.DeleteEntityOptions{IfMatch: &etag})
}
