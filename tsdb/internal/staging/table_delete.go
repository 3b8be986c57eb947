package staging

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
)

// maxDeleteAttempts bounds the rewrites of a staging entity that keeps changing.
const maxDeleteAttempts = 20

// Delete removes the staged points and histogram samples of series in [from, to): each
// staging entity whose column holds some is read whole and written again without them (or
// deleted when nothing is left), conditionally on its ETag; one that changed meanwhile is
// read again. One query finds the entities of both kinds.
func (st *Table) Delete(ctx context.Context, series string, from, to time.Time) error {
	if !st.reads || !from.Before(to) {
		return nil
	}
	lo, hi := EarliestMilli(from), EarliestMilli(to)
	var keys [][2]string
	q := Query([]string{series}, from, to, Both)
	q.Select = "PartitionKey," + q.Select // the keys of the entities to rewrite
	for se, err := range st.Entities(ctx, q, nil) {
		if err != nil {
			return err
		}
		if se.Holds(series, lo, hi) {
			keys = append(keys, [2]string{se.PartitionKey, se.RowKey})
		}
	}
	var err error
	for _, k := range keys {
		if err = deleteFromEntity(ctx, st.client, k[0], k[1], series, lo, hi); err != nil {
			err = fmt.Errorf("tsdb: delete staged points: %w", err)
			break
		}
	}
	// Recorded in the staging log after the entities changed, failed or not (some may
	// have): a process that listed the table before lists it whole again.
	if len(keys) > 0 {
		if rerr := st.recordChanged(ctx); err == nil && rerr != nil {
			err = fmt.Errorf("tsdb: delete staged points: %w", rerr)
		}
	}
	return err
}

// deleteFromEntity rewrites one staging entity without the points of series in [lo, hi).
func deleteFromEntity(ctx context.Context, client *aztables.Client, pk, rk, series string, lo, hi int64) error {
	for range maxDeleteAttempts {
		resp, err := client.GetEntity(ctx, pk, rk, nil)
		if azerr.IsStatus(err, http.StatusNotFound) {
			return nil // folded meanwhile: its points are in the raw tables, deleted next
		}
		if err != nil {
			return err
		}
		var e entity.Entity
		e.AllowStrings = true
		se, err := Decode(&e, resp.Value, nil)
		if err != nil {
			return err
		}
		body, empty := Without(&e, se, series, lo, hi)
		etag := resp.ETag
		if empty {
			_, err = client.DeleteEntity(ctx, pk, rk, &aztables.DeleteEntityOptions{IfMatch: &etag})
		} else {
			_, err = client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		}
		var re *azcore.ResponseError
		switch {
		case err == nil, azerr.IsStatus(err, http.StatusNotFound):
			return nil
		case errors.As(err, &re) && re.StatusCode == http.StatusPreconditionFailed:
			continue // changed meanwhile: read it again
		default:
			return err
		}
	}
	return fmt.Errorf("staging entity %s/%s still changed after %d attempts", pk, rk, maxDeleteAttempts)
}
