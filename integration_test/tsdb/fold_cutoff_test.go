package tsdb

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/tsdb"
)

// A Fold cut off in its deletes (the account gone after its first delete transaction: an
// outage, a server killed) leaves entities it folded. The Fold after it, another server's
// once the lease ended, only deletes them: it writes no sample and records no change in the
// raw change log. So a server whose caches are warm takes the first Fold in, and after the
// second reads nothing back from the raw tables: before, the second Fold wrote those
// entities' samples again, as a change whose receipt named only the entities left, which
// no server's listing matched, and every server read the Fold's minutes of every series
// back (docs/soak.md, run 149). Every answer equals a reader's without caches.
func TestTSDBFoldCutOffInItsDeletes(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC)
	clk := clock.New(base.Add(19 * time.Hour))
	opts, db, checker, other, fresh := warmAndPlainServers(t, clk)
	keys := seriesNumbered(t, other, "req", 60)
	// 20 minutes of scrapes, 19:00 to 19:20: two arrival buckets, each of its own
	// partition, so a delete transaction each.
	for range 4 * 20 {
		at := clk.Now()
		batch := make([]tsdb.SeriesPoints, len(keys))
		for i, k := range keys {
			batch[i] = tsdb.SeriesPoints{Series: k, Points: []tablets.Point{{Time: at, Value: float64(i) + float64(at.Unix()%1000)}}}
		}
		require.NoError(t, other.WriteMany(ctx, batch))
		clk.Add(15 * time.Second)
	}
	refresh := func(what string) (int64, int64) {
		t.Helper()
		return refreshHour(ctx, t, db, fresh(), opts.RawCache, checker, clk, what, tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "req"})
	}
	refresh("first")
	refresh("warm")

	clk.Set(base.Add(19*time.Hour + 25*time.Minute)) // both buckets due
	cut := &cutInDeletes{}
	folder := reopenWith(t, db.Name(), stagingOptions(clk), func(next policy.Transporter) policy.Transporter { cut.next = next; return cut })
	_, err := folder.Fold(ctx)
	require.ErrorContains(t, err, errCutOff.Error(), "the Fold was cut off in its deletes")
	require.Equal(t, int64(2), cut.deletes.Load(), "one delete transaction went through, the next was cut off")
	_, took := refresh("after the cut-off Fold")
	require.Equal(t, int64(len(keys)), took, "every series took the cut-off Fold in")

	clk.Add(6 * time.Minute) // the dead Fold's lease ended; no other bucket is due
	missed := foldMisses(opts.RawCache)
	rep, err := other.Fold(ctx)
	require.NoError(t, err)
	misses := opts.RawCache.Stats().Misses
	requests, took := refresh("after the Fold that finished the deletes")
	require.Empty(t, foldMisses(opts.RawCache).since(missed), "no series missed a Fold")
	require.Equal(t, misses, opts.RawCache.Stats().Misses, "nothing read back from the raw tables")
	require.Zero(t, took, "no change to take in")
	t.Logf("the refresh after: %d requests", requests)
	require.NotZero(t, rep.Entities, "the Fold deleted what the cut-off one left")
	require.Zero(t, rep.Points, "and wrote no sample")
	require.Zero(t, rep.Series)
	rep, err = other.Fold(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Entities, "nothing left to fold")
}

// errCutOff is the error of a request after the cut.
var errCutOff = errors.New("cut off: the account is gone")

// cutInDeletes passes requests to next until the second transaction that deletes (a Fold's
// second delete transaction): it and every request after it fail.
type cutInDeletes struct {
	next    policy.Transporter
	deletes atomic.Int64
	gone    atomic.Bool
}

func (c *cutInDeletes) Do(req *http.Request) (*http.Response, error) {
	if c.gone.Load() {
		return nil, errCutOff
	}
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "$batch") && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte("DELETE ")) && c.deletes.Add(1) > 1 {
			c.gone.Store(true)
			return nil, errCutOff
		}
	}
	return c.next.Do(req)
}
