package tsdb

import (
	"context"
	"time"
)

// FoldReport says what a Fold did.
type FoldReport struct {
	// Entities is the number of staged entities folded (and then deleted).
	Entities int
	// Points is the number of staged points written to the raw tables.
	Points int
	// Series is the number of series written.
	Series int
	// Through is the end of the arrival time folded: every point staged before it is in
	// the raw tables (zero when there was nothing to fold).
	Through time.Time
}

// Fold moves the staged points into the raw tables (see the package documentation,
// "Staging"). STUB: the real implementation lands with the staging write path.
func (db *DB) Fold(ctx context.Context) (FoldReport, error) {
	return FoldReport{}, nil
}
