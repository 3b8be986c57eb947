package remote

import (
	"context"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

var _ Sink = (*tsdb.DB)(nil)

// Remote write 1.0 and 2.0 into a real database on Azurite, read back exactly.
func TestIntegrationWriteToDB(t *testing.T) {
	db, _, _ := dbtest.NewDB(t, &tsdb.Options{Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	ctx := context.Background()
	h := newWrite(t, db, nil)

	base := time.Now().Add(-time.Hour).UnixMilli()
	v1 := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: v1Labels("__name__", "up", "job", "api", "instance", "a:9090"), Samples: []prompb.Sample{
			{Timestamp: base, Value: 1}, {Timestamp: base + 15_001, Value: 0}, {Timestamp: base + 30_002, Value: staleNaN},
		}},
		{Labels: v1Labels("__name__", "temp_celsius", "room", "kitchen"), Samples: []prompb.Sample{
			{Timestamp: base + 7, Value: 21.25}, {Timestamp: base + 1007, Value: 1.0 / 3},
		}},
		// A later write of a timestamp in the same request wins.
		{Labels: v1Labels("__name__", "temp_celsius", "room", "kitchen"), Samples: []prompb.Sample{{Timestamp: base + 7, Value: 22.5}}},
	}}
	w := post(t, h, "application/x-protobuf", "snappy", encodeV1(t, v1))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())

	b := newV2()
	b.series([]writev2.Sample{{Timestamp: base + 1, Value: 1e6}, {Timestamp: base + 2, Value: math.Inf(1)}, {Timestamp: base + 3, Value: staleNaN}},
		"__name__", "http_requests_total", "code", "200", "job", "api")
	// A 1.0-written series again, through 2.0: the same series key.
	b.series([]writev2.Sample{{Timestamp: base + 45_003, Value: 1}}, "__name__", "up", "instance", "a:9090", "job", "api")
	w = post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	assert.Equal(t, "4", w.Header().Get(HeaderSamplesWritten))

	// Both writes again: idempotent (what a retry does).
	require.Equal(t, http.StatusNoContent, post(t, h, "application/x-protobuf", "snappy", encodeV1(t, v1)).Code)

	from, to := time.UnixMilli(base-1000), time.UnixMilli(base+60_000)
	found := map[string]string{}
	for s, err := range db.Select(ctx, from, to, tsdb.Matcher{Type: tsdb.MatchRegexp, Name: tsdb.MetricName, Value: "up|temp_celsius|http_requests_total"}) {
		require.NoError(t, err)
		found[s.Labels.String()] = s.Series
	}
	require.Len(t, found, 3)
	for name, want := range map[string][]tablets.Point{
		`up{instance="a:9090", job="api"}`:           {pt(base, 1), pt(base+15_001, 0), pt(base+30_002, staleNaN), pt(base+45_003, 1)},
		`temp_celsius{room="kitchen"}`:               {pt(base+7, 22.5), pt(base+1007, 1.0/3)},
		`http_requests_total{code="200", job="api"}`: {pt(base+1, 1e6), pt(base+2, math.Inf(1)), pt(base+3, staleNaN)},
	} {
		key, ok := found[name]
		require.True(t, ok, "series %s not found in %v", name, found)
		var got []tablets.Point
		for p, err := range db.Query(ctx, key, from, to) {
			require.NoError(t, err)
			got = append(got, p)
		}
		requireSamePoints(t, want, got)
		for _, p := range got {
			assert.Zero(t, p.Time.UnixNano()%int64(time.Millisecond), "millisecond timestamps")
		}
	}

	// Invalid input never reaches Azure: 400, nothing stored for it.
	bad := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: v1Labels("job", "x"), Samples: []prompb.Sample{{Timestamp: base, Value: 1}}}}}
	w = post(t, h, "", "snappy", encodeV1(t, bad))
	assert.Equal(t, http.StatusBadRequest, w.Code)
}

// A remote write holding samples older than the database's raw retention (by its clock)
// stores the others and answers 400 naming what the database rejected: the handler keeps no
// retention rule of its own.
func TestIntegrationWriteExpired(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	db, _, _ := dbtest.NewDB(t, &tsdb.Options{RawRetention: 24 * time.Hour, Now: func() time.Time { return now }})
	h := newWrite(t, db, nil)
	fresh, old := now.Add(-time.Hour).UnixMilli(), now.Add(-25*time.Hour).UnixMilli()
	b := newV2()
	b.series([]writev2.Sample{{Timestamp: old, Value: 1}, {Timestamp: fresh, Value: 2}}, "__name__", "m", "job", "a")
	b.series([]writev2.Sample{{Timestamp: fresh, Value: 3}}, "__name__", "m", "job", "b")
	b.series([]writev2.Sample{{Timestamp: old, Value: 4}}, "__name__", "m", "job", "c")
	w := post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	assert.Equal(t, "2", w.Header().Get(HeaderSamplesWritten))
	assert.Contains(t, w.Body.String(), "stored 2 of 4 float samples; 2 samples rejected")
	assert.Contains(t, w.Body.String(), tsdb.ErrExpired.Error())
	st := h.Stats()
	assert.Equal(t, uint64(2), st.SamplesRejected)
	assert.Equal(t, uint64(2), st.SamplesWritten)

	ctx := context.Background()
	got := map[string][]tablets.Point{}
	for s, err := range db.Select(ctx, now.Add(-48*time.Hour), now, tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "m"}) {
		require.NoError(t, err)
		for p, err := range db.Query(ctx, s.Series, now.Add(-48*time.Hour), now) {
			require.NoError(t, err)
			got[s.Labels.Get("job")] = append(got[s.Labels.Get("job")], p)
		}
	}
	require.Len(t, got, 2, "job c has no point stored")
	requireSamePoints(t, []tablets.Point{pt(fresh, 2)}, got["a"])
	requireSamePoints(t, []tablets.Point{pt(fresh, 3)}, got["b"])
}
