package tsdb

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/rounding"
)

// Tasks whose progress the catalog keeps (Covered, SetCovered): the maintenance scheduler
// (internal/maintain/schedule: the server's loops, tablets maintain) records theirs under
// these names.
const (
	TaskRollup  = "rollup"  // Rollup: the tier windows before it are rolled up
	TaskCompact = "compact" // Compact: the raw chunks before it are compacted
)

// The progress entities of the catalog (docs/format.md, "The catalog").
const (
	catalogProgress      = "progress" // PartitionKey; RowKey the task
	progressVersion      = 1
	progressVersionProp  = "V" // Edm.Double: progressVersion
	progressCoveredProp  = "T" // Edm.Double: the covered time, Unix milliseconds
	maxProgressAttempts  = 20
	maxProgressTaskBytes = 64
)

// Covered returns the time before which task is done, as SetCovered recorded it (ok
// false: never recorded): one request. A bad task name gives an error wrapping
// tablets.ErrInvalidOptions before any request.
func (db *DB) Covered(ctx context.Context, task string) (covered time.Time, ok bool, err error) {
	if err := checkTask(task); err != nil {
		return time.Time{}, false, err
	}
	ms, _, ok, err := db.catalog.progress(ctx, task)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	return time.UnixMilli(ms).UTC(), true, nil
}

// SetCovered records that task is done before t, to the millisecond (rounded down: a
// process reading it covers at most a millisecond again). It never moves the record
// backward: a later time recorded already stays, so any number of processes may record
// their progress at once and the latest wins. It reads the record, then writes it
// conditionally on the ETag read (or inserts it), and starts again when another process
// wrote meanwhile: two requests, one when the record is already as late. A bad task name
// gives an error wrapping tablets.ErrInvalidOptions, a time outside [tablets.MinTime,
// tablets.MaxTime] one wrapping tablets.ErrInvalidTime, before any request.
func (db *DB) SetCovered(ctx context.Context, task string, t time.Time) error {
	if err := checkTask(task); err != nil {
		return err
	}
	if err := rounding.CheckTime(t); err != nil {
		return fmt.Errorf("tsdb: progress of %s: %w", task, err)
	}
	if err := db.catalog.raiseProgress(ctx, task, t.UnixMilli()); err != nil {
		return fmt.Errorf("tsdb: progress of %s: %w", task, err)
	}
	return nil
}

// checkTask checks a task name: 1 to 64 letters, digits, '-' or '_' (a RowKey of the
// catalog).
func checkTask(task string) error {
	ok := task != "" && len(task) <= maxProgressTaskBytes
	for _, c := range task {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_')
	}
	if !ok {
		return fmt.Errorf("tsdb: %w: task name %q is not 1 to %d letters, digits, '-' or '_'", tablets.ErrInvalidOptions, task, maxProgressTaskBytes)
	}
	return nil
}

// appendProgress is the body of task's progress entity.
func appendProgress(task string, ms int64) []byte {
	b := entity.AppendKeys(nil, catalogProgress, task)
	b = entity.AppendDouble(b, progressVersionProp, progressVersion)
	return entity.AppendEnd(entity.AppendDouble(b, progressCoveredProp, float64(ms)))
}

// progress reads task's progress entity: its time (Unix milliseconds) and ETag; ok false:
// there is none.
func (c *catalog) progress(ctx context.Context, task string) (ms int64, etag azcore.ETag, ok bool, err error) {
	resp, err := c.client.GetEntity(ctx, catalogProgress, task, nil)
	if isStatus(err, http.StatusNotFound) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("tsdb: catalog: %w", err)
	}
	ms, err = decodeProgress(resp.Value)
	if err != nil {
		return 0, "", false, fmt.Errorf("tsdb: catalog: progress of %s: %w", task, err)
	}
	return ms, resp.ETag, true, nil
}

// decodeProgress returns the time of a progress entity, or why it cannot be read: another
// version (a newer program's, which this one must not overwrite), or no valid time.
func decodeProgress(raw []byte) (int64, error) {
	e := entity.Entity{AllowStrings: true} // a newer version may hold strings: say which version
	if err := e.Decode(raw); err != nil {
		return 0, err
	}
	version, covered := math.NaN(), math.NaN()
	for _, p := range e.Props {
		switch string(p.Name) {
		case progressVersionProp:
			version = p.Value
		case progressCoveredProp:
			covered = p.Value
		}
	}
	if version != progressVersion {
		return 0, fmt.Errorf("format version %v, not %d", version, progressVersion)
	}
	if covered != math.Trunc(covered) || covered < 0 || covered > float64(tablets.MaxTime.UnixMilli()) {
		return 0, fmt.Errorf("time %v is not a whole number of milliseconds in range", covered)
	}
	return int64(covered), nil
}

// raiseProgress records ms as task's progress unless the record is as late already.
func (c *catalog) raiseProgress(ctx context.Context, task string, ms int64) error {
	body := appendProgress(task, ms)
	for range maxProgressAttempts {
		stored, etag, ok, err := c.progress(ctx, task)
		switch {
		case err != nil:
			return err
		case ok && stored >= ms:
			return nil
		case ok:
			_, err = c.client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		default:
			_, err = c.client.AddEntity(ctx, body, nil)
		}
		switch {
		case err == nil:
			return nil
		case isStatus(err, http.StatusPreconditionFailed), isStatus(err, http.StatusConflict), isStatus(err, http.StatusNotFound):
			// Written, inserted or deleted since the read (by another process, or by this
			// one's request whose reply was lost and retried): read again.
		default:
			return fmt.Errorf("tsdb: catalog: %w", err)
		}
	}
	return fmt.Errorf("the record still changed after %d attempts", maxProgressAttempts)
}
