package layouts

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/basic"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/itest"
)

// The basic layout's Latest hint: a Write upserts it in its last transaction, range reads
// never see it, and Latest finds an old series in a few requests through it.
func TestBasicLatestHint(t *testing.T) {
	client, checker := azurite.NewTable(t, nil)
	s, err := basic.New(client, nil)
	require.NoError(t, err)
	ctx := context.Background()
	old := time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)
	var pts []tablets.Point
	for i := range 150 {
		pts = append(pts, tablets.Point{Time: old.Add(time.Duration(i) * time.Second), Value: float64(i)})
	}
	require.NoError(t, s.Write(ctx, "h", pts...))
	require.Equal(t, int64(2), checker.Stats().Batches, "150 points and the hint: two transactions")
	resp, err := client.GetEntity(ctx, "h", "!latest", nil)
	require.NoError(t, err)
	var e map[string]any
	require.NoError(t, json.Unmarshal(resp.Value, &e))
	require.EqualValues(t, pts[149].Time.UnixMilli(), e["V"], "the newest time written, in ms")
	require.Len(t, itest.CollectPoints(t, s.Query(ctx, "h", tablets.MinTime, tablets.MaxTime)), 150, "a range read never sees the hint")

	before := checker.Stats().Requests
	got, err := s.Latest(ctx, "h", 100)
	require.NoError(t, err)
	require.Len(t, got, 100)
	require.True(t, got[0].Time.Equal(pts[149].Time))
	require.LessOrEqual(t, checker.Stats().Requests-before, int64(3), "Latest of a series last written in 2019")
}
