package staging

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/seed71701133/tablets/internal/priority"
	"github.com/seed71701133/tablets/tsdb/internal/lease"
	"github.com/seed71701133/tablets/tsdb/internal/sentinel"
)

// One Fold at a time folds a database: the one holding the fold lease, an entity of the
// catalog taken and renewed conditionally on its ETag. Two folds at once would each be
// right on their own, but a fold that read some staging entities while another deleted
// others could write an old value of a time with the priority of a newer entity it also
// read, over the newer value the other wrote.
const (
	// FoldLeaseTerm is how long a lease lasts unless renewed (between rounds, and once half
	// of it has passed: see foldLease).
	FoldLeaseTerm = 5 * time.Minute
	// foldLeaseMargin: a holder stops writing this long before its lease ends, so that a
	// write it starts ends before another process may take the lease.
	foldLeaseMargin = 90 * time.Second
	// FoldLeasePK is the PartitionKey of the lease entity in the catalog (its RowKey is
	// lease.RowKey).
	FoldLeasePK = "fold"
)

// ErrFoldLeaseLost: the lease ended or was taken before the fold was done.
var ErrFoldLeaseLost = errors.New("tsdb: the fold lease ended before the fold was done")

// foldLeaseKind is the fold's lease (package lease).
var foldLeaseKind = lease.Kind{PartitionKey: FoldLeasePK, Term: FoldLeaseTerm, Margin: foldLeaseMargin,
	Busy: sentinel.ErrFoldBusy, Lost: ErrFoldLeaseLost}

// foldLease is a held fold lease: a fold renews it between rounds (Renew) and as its
// rounds go (Keep: a round of a large staging table, the hour a backfill wrote, read and
// written while queries share the account, may take longer than a term; in soak run 10
// every fold of the backfilled hour failed for want of it, again and again, and the staging
// table grew through the run).
type foldLease = lease.Lease

// takeLease takes the fold lease, or returns ErrFoldBusy while another holds it. Leases
// are measured by Options.Now, like everything time-dependent in a DB. The holder is this
// handle's writer id (its staging entities') and a stamp.
func (f *Folder) takeLease(ctx context.Context) (*foldLease, error) {
	holder := strconv.FormatUint(uint64(f.staging.writer), 16) + "-" + strconv.FormatUint(priority.Next(), 16)
	return lease.Take(ctx, f.catalog, foldLeaseKind, holder, f.now)
}

// FoldLeaseBody is the fold lease entity of holder, ending at until (docs/format.md).
func FoldLeaseBody(holder string, until time.Time) []byte {
	return lease.Body(FoldLeasePK, holder, until)
}
