package tsdb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/stageenc"
)

// maxDeleteAttempts bounds the rewrites of a staging entity that keeps changing.
const maxDeleteAttempts = 20

// deleteStaged removes the staged points and histogram samples of series in [from, to):
// each staging entity whose column holds some is read whole and written again without them
// (or deleted when nothing is left), conditionally on its ETag; one that changed meanwhile
// is read again. One query finds the entities of both kinds.
func (db *DB) deleteStaged(ctx context.Context, series string, from, to time.Time) error {
	if !db.stagedReads || !from.Before(to) {
		return nil
	}
	lo, hi := earliestMilli(from), earliestMilli(to)
	var keys [][2]string
	q := stagedQuery([]string{series}, from, to, stagedBoth)
	q.Select = "PartitionKey," + q.Select // the keys of the entities to rewrite
	for se, err := range db.stagedEntities(ctx, q, nil) {
		if err != nil {
			return err
		}
		if holds(se.series, series, lo, hi) || holdsHist(se.hists, series, lo, hi) {
			keys = append(keys, [2]string{se.partitionKey, se.rowKey})
		}
	}
	client := db.service.NewClient(db.names.Staging())
	for _, k := range keys {
		if err := deleteFromEntity(ctx, client, k[0], k[1], series, lo, hi); err != nil {
			return fmt.Errorf("tsdb: delete staged points: %w", err)
		}
	}
	return nil
}

// holds reports whether any of list holds a point of series in [lo, hi) milliseconds.
func holds(list []stageenc.Series, series string, lo, hi int64) bool {
	for _, s := range list {
		if s.Key != series {
			continue
		}
		for _, ms := range s.Times {
			if ms >= lo && ms < hi {
				return true
			}
		}
	}
	return false
}

// holdsHist is holds of histogram samples.
func holdsHist(list []stageenc.HistSeries, series string, lo, hi int64) bool {
	for _, s := range list {
		if s.Key != series {
			continue
		}
		for _, h := range s.Samples {
			if ms := int64(h.Unit); ms >= lo && ms < hi {
				return true
			}
		}
	}
	return false
}

// deleteFromEntity rewrites one staging entity without the points of series in [lo, hi).
func deleteFromEntity(ctx context.Context, client *aztables.Client, pk, rk, series string, lo, hi int64) error {
	for range maxDeleteAttempts {
		resp, err := client.GetEntity(ctx, pk, rk, nil)
		if isStatus(err, http.StatusNotFound) {
			return nil // folded meanwhile: its points are in the raw tables, deleted next
		}
		if err != nil {
			return err
		}
		var e entity.Entity
		e.AllowStrings = true
		se, err := decodeStaged(&e, resp.Value, nil)
		if err != nil {
			return err
		}
		body, empty := stagedWithout(&e, se, series, lo, hi)
		etag := resp.ETag
		if empty {
			_, err = client.DeleteEntity(ctx, pk, rk, &aztables.DeleteEntityOptions{IfMatch: &etag})
		} else {
			_, err = client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		}
		var re *azcore.ResponseError
		switch {
		case err == nil, isStatus(err, http.StatusNotFound):
			return nil
		case errors.As(err, &re) && re.StatusCode == http.StatusPreconditionFailed:
			continue // changed meanwhile: read it again
		default:
			return err
		}
	}
	return fmt.Errorf("staging entity %s/%s still changed after %d attempts", pk, rk, maxDeleteAttempts)
}

// stagedWithout is the body of a staging entity (decoded as e and se) without the points of
// series in [lo, hi), and whether no point is left.
func stagedWithout(e *entity.Entity, se stagedEntity, series string, lo, hi int64) ([]byte, bool) {
	out := &stagingEntity{partitionKey: se.partitionKey, rowKey: se.rowKey, version: se.version}
	for _, sp := range e.Strings {
		switch string(sp.Name) {
		case stageLoProp:
			v, _ := strconv.ParseUint(string(sp.Value), 16, 8)
			out.lo = int(v)
		case stageHiProp:
			v, _ := strconv.ParseUint(string(sp.Value), 16, 8)
			out.hi = int(v)
		}
	}
	for _, s := range se.series {
		kept := s
		if s.Key == series {
			kept = stageenc.Series{Key: s.Key}
			for i, ms := range s.Times {
				if ms < lo || ms >= hi {
					kept.Times = append(kept.Times, ms)
					kept.Values = append(kept.Values, s.Values[i])
				}
			}
		}
		if len(kept.Times) > 0 {
			_, column := stageHash(kept.Key)
			out.add(column, kept, stagedPiece{})
		}
	}
	for _, s := range se.hists {
		kept := s
		if s.Key == series {
			kept = stageenc.HistSeries{Key: s.Key}
			for _, h := range s.Samples {
				if ms := int64(h.Unit); ms < lo || ms >= hi {
					kept.Samples = append(kept.Samples, h)
				}
			}
		}
		if len(kept.Samples) > 0 {
			_, column := stageHash(kept.Key)
			first, last := int64(kept.Samples[0].Unit), int64(kept.Samples[len(kept.Samples)-1].Unit)
			out.addHist(column, kept.Key, histenc.Append(nil, kept.Samples), first, last, len(kept.Samples), stagedPiece{})
		}
	}
	return out.body(), len(out.pieces) == 0
}
