package tablets_test

import (
	"context"
	"io"
	"iter"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/basic"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb"
	"github.com/seed71701133/tablets/writer"
)

// countingTransport counts the requests that reach it and answers each with 409
// TableAlreadyExists: enough for tsdb.Open (its catalog table "exists"), and an answer no
// other call takes for success; but the read of a catalog's formats, which it answers with
// the records (docs/format.md: the database records its raw format and tier layout).
type countingTransport struct{ requests atomic.Int64 }

const formatRecords = `{"value":[` +
	`{"PartitionKey":"format","RowKey":"raw","V":1,"V@odata.type":"Edm.Double","L":"chunked/1ms"},` +
	`{"PartitionKey":"format","RowKey":"tiers","V":2,"V@odata.type":"Edm.Double","L":"packed"}]}`

func (c *countingTransport) Do(req *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "m()") && strings.Contains(req.URL.Query().Get("$filter"), "'format'") {
		return &http.Response{
			StatusCode: http.StatusOK,
			Status:     "200 OK",
			Header:     http.Header{"Content-Type": {"application/json"}},
			Body:       io.NopCloser(strings.NewReader(formatRecords)),
			Request:    req,
		}, nil
	}
	return &http.Response{
		StatusCode: http.StatusConflict,
		Status:     "409 Conflict",
		Header:     http.Header{"X-Ms-Error-Code": {"TableAlreadyExists"}, "Content-Type": {"application/json"}},
		Body:       io.NopCloser(strings.NewReader(`{"odata.error":{"code":"TableAlreadyExists","message":{"value":"exists"}}}`)),
		Request:    req,
	}, nil
}

func (c *countingTransport) clientOptions() policy.ClientOptions {
	return policy.ClientOptions{Transport: c, Retry: policy.RetryOptions{MaxRetries: -1}}
}

// badCase is one call with bad input and the sentinel its error must wrap.
type badCase struct {
	name string
	want error
	call func() error
}

// firstErr returns the first error a stream yields.
func firstErr[T any](seq iter.Seq2[T, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

// requireRejected runs each case and checks that its error wraps the right sentinel, and
// no other, and that it sent no request.
func requireRejected(t *testing.T, tr *countingTransport, cases []badCase) {
	t.Helper()
	sentinels := []error{tablets.ErrInvalidSeries, tablets.ErrInvalidTime, tablets.ErrInvalidOptions, tablets.ErrInvalidToken,
		tablets.ErrInvalidLabels, tablets.ErrInvalidMatcher, tablets.ErrInvalidLimit}
	for _, c := range cases {
		before := tr.requests.Load()
		err := c.call()
		require.ErrorIs(t, err, c.want, c.name)
		for _, s := range sentinels {
			if s != c.want {
				require.NotErrorIs(t, err, s, "%s: %v", c.name, err)
			}
		}
		require.Equal(t, before, tr.requests.Load(), "%s: bad input sent a request", c.name)
	}
}

// Every public constructor and option check refuses bad input with an error wrapping the
// sentinel tablets.go names for it, before any request.
func TestBadInputConstructors(t *testing.T) {
	ctx := context.Background()
	tr := &countingTransport{}
	client, err := aztables.NewClientWithNoCredential("https://account.table.core.windows.net/t",
		&aztables.ClientOptions{ClientOptions: tr.clientOptions()})
	require.NoError(t, err)
	service, err := aztables.NewServiceClientWithNoCredential("https://account.table.core.windows.net/",
		&aztables.ClientOptions{ClientOptions: tr.clientOptions()})
	require.NoError(t, err)
	sink, err := basic.New(client, nil)
	require.NoError(t, err)

	opts := tablets.ErrInvalidOptions
	requireRejected(t, tr, []badCase{
		{"basic.New nil client", opts, func() error { _, err := basic.New(nil, nil); return err }},
		{"basic.New Concurrency", opts, func() error { _, err := basic.New(client, &basic.Options{Concurrency: -1}); return err }},
		{"basic.New Resolution", opts, func() error { _, err := basic.New(client, &basic.Options{Resolution: time.Nanosecond}); return err }},
		{"advanced.New nil client", opts, func() error { _, err := advanced.New(nil, nil); return err }},
		{"advanced.New Resolution", opts, func() error { _, err := advanced.New(client, &advanced.Options{Resolution: -time.Second}); return err }},
		{"advanced.New 300 slots", opts, func() error {
			_, err := advanced.New(client, &advanced.Options{RowFactor: 5 * time.Minute, PartitionFactor: time.Hour})
			return err
		}},
		{"advanced.New RowFactor", opts, func() error {
			_, err := advanced.New(client, &advanced.Options{RowFactor: 7 * time.Second, Resolution: 2 * time.Second})
			return err
		}},
		{"chunked.New nil client", opts, func() error { _, err := chunked.New(nil, nil); return err }},
		{"chunked.New MaxChunkBytes", opts, func() error { _, err := chunked.New(client, &chunked.Options{MaxChunkBytes: 100}); return err }},
		{"chunked.New PartitionFactor", opts, func() error {
			_, err := chunked.New(client, &chunked.Options{PartitionFactor: 1500 * time.Microsecond})
			return err
		}},
		{"tsdb.Open nil service", opts, func() error { _, err := tsdb.Open(ctx, nil, "metrics", nil); return err }},
		{"tsdb.Open name", opts, func() error { _, err := tsdb.Open(ctx, service, "1metrics", nil); return err }},
		{"tsdb.Open RawPeriod", opts, func() error {
			_, err := tsdb.Open(ctx, service, "metrics", &tsdb.Options{RawPeriod: 1500 * time.Millisecond})
			return err
		}},
		{"tsdb.Open RawRetention", opts, func() error {
			_, err := tsdb.Open(ctx, service, "metrics", &tsdb.Options{RawRetention: -time.Hour})
			return err
		}},
		{"tsdb.Open layout", opts, func() error {
			_, err := tsdb.Open(ctx, service, "metrics", &tsdb.Options{Layout: func(c *aztables.Client) (tablets.Store, error) {
				return basic.New(c, &basic.Options{Concurrency: -1})
			}})
			return err
		}},
		{"tsdb.CheckOptions", opts, func() error { return tsdb.CheckOptions("m", nil) }},
		{"writer.New nil sink", opts, func() error { _, err := writer.New(nil, nil); return err }},
		{"writer.New MaxBuffered", opts, func() error { _, err := writer.New(sink, &writer.Options{MaxBuffered: -1}); return err }},
		{"writer.New FlushInterval", opts, func() error { _, err := writer.New(sink, &writer.Options{FlushInterval: -time.Second}); return err }},
		{"rounding.NewKeyFormat", opts, func() error { _, err := rounding.NewKeyFormat(0); return err }},
		{"tablets.ParseAggregation", opts, func() error { _, err := tablets.ParseAggregation("p101"); return err }},
		{"tablets.Downsample step", opts, func() error {
			return firstErr(tablets.Downsample(func(func(tablets.Point, error) bool) {}, 0, tablets.Avg))
		}},
	})
}

// Every store's calls refuse bad input before any request, each with its own sentinel; and
// tsdb's label sets and matchers have theirs.
func TestBadInputCalls(t *testing.T) {
	ctx := context.Background()
	tr := &countingTransport{}
	client, err := aztables.NewClientWithNoCredential("https://account.table.core.windows.net/t",
		&aztables.ClientOptions{ClientOptions: tr.clientOptions()})
	require.NoError(t, err)
	service, err := aztables.NewServiceClientWithNoCredential("https://account.table.core.windows.net/",
		&aztables.ClientOptions{ClientOptions: tr.clientOptions()})
	require.NoError(t, err)

	b, err := basic.New(client, nil)
	require.NoError(t, err)
	a, err := advanced.New(client, nil)
	require.NoError(t, err)
	c, err := chunked.New(client, nil)
	require.NoError(t, err)
	db, err := tsdb.Open(ctx, service, "metrics", nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, tr.requests.Load(), "Open creates the catalog table and reads its formats, nothing else")

	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(time.Hour)
	for name, s := range map[string]tablets.Store{"basic": b, "advanced": a, "chunked": c, "tsdb": db} {
		t.Run(name, func(t *testing.T) {
			requireRejected(t, tr, []badCase{
				{"QueryPage limit 0", tablets.ErrInvalidLimit, func() error { _, err := s.QueryPage(ctx, "cpu", from, to, 0, ""); return err }},
				{"QueryPage limit -1", tablets.ErrInvalidLimit, func() error { _, err := s.QueryPage(ctx, "cpu", from, to, -1, ""); return err }},
				{"Latest n 0", tablets.ErrInvalidLimit, func() error { _, err := s.Latest(ctx, "cpu", 0); return err }},
				{"QueryPage token", tablets.ErrInvalidToken, func() error { _, err := s.QueryPage(ctx, "cpu", from, to, 10, "nope"); return err }},
				{"Write empty series", tablets.ErrInvalidSeries, func() error { return s.Write(ctx, "", tablets.Point{Time: from}) }},
				{"Write series with /", tablets.ErrInvalidSeries, func() error { return s.Write(ctx, "a/b", tablets.Point{Time: from}) }},
				{"Write before 1970", tablets.ErrInvalidTime, func() error { return s.Write(ctx, "cpu", tablets.Point{Time: tablets.MinTime.Add(-1)}) }},
				{"Query from after to", tablets.ErrInvalidTime, func() error { return firstErr(s.Query(ctx, "cpu", to, from)) }},
				{"Delete from after to", tablets.ErrInvalidTime, func() error { return s.Delete(ctx, "cpu", to, from) }},
			})
		})
	}

	bad := tsdb.Matcher{Type: tsdb.MatchRegexp, Name: "job", Value: "(unclosed"}
	requireRejected(t, tr, []badCase{
		{"Canonical no labels", tablets.ErrInvalidLabels, func() error { _, err := tsdb.Canonical(nil); return err }},
		{"Canonical empty name", tablets.ErrInvalidLabels, func() error { _, err := tsdb.Canonical(tsdb.Labels{{Name: "", Value: "x"}}); return err }},
		{"Validate unsorted", tablets.ErrInvalidLabels, func() error { return tsdb.Labels{{Name: "b", Value: "1"}, {Name: "a", Value: "2"}}.Validate() }},
		{"SeriesOf duplicate", tablets.ErrInvalidLabels, func() error {
			_, err := db.SeriesOf(ctx, tsdb.Labels{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}})
			return err
		}},
		{"SeriesOfMany one bad", tablets.ErrInvalidLabels, func() error {
			_, err := db.SeriesOfMany(ctx, []tsdb.Labels{tsdb.LabelsFromStrings("a", "1"), {{Name: "a", Value: "\xff"}}})
			return err
		}},
		{"LabelValues empty name", tablets.ErrInvalidLabels, func() error { _, err := db.LabelValues(ctx, "", from, to); return err }},
		{"Select no matcher", tablets.ErrInvalidMatcher, func() error { return firstErr(db.Select(ctx, from, to)) }},
		{"Select only empty-matching", tablets.ErrInvalidMatcher, func() error {
			return firstErr(db.Select(ctx, from, to, tsdb.Matcher{Type: tsdb.MatchRegexp, Name: "job", Value: ".*"}))
		}},
		{"Select bad regexp", tablets.ErrInvalidMatcher, func() error {
			return firstErr(db.Select(ctx, from, to, tsdb.Matcher{Type: tsdb.MatchEqual, Name: "a", Value: "b"}, bad))
		}},
		{"Select unknown type", tablets.ErrInvalidMatcher, func() error {
			return firstErr(db.Select(ctx, from, to, tsdb.Matcher{Type: tsdb.MatchType(9), Name: "a", Value: "b"}))
		}},
		{"LabelNames bad regexp", tablets.ErrInvalidMatcher, func() error { _, err := db.LabelNames(ctx, from, to, bad); return err }},
		{"LabelValues bad regexp", tablets.ErrInvalidMatcher, func() error { _, err := db.LabelValues(ctx, "job", from, to, bad); return err }},
		{"Aggregate step", tablets.ErrInvalidOptions, func() error { return firstErr(db.Aggregate(ctx, []string{"cpu"}, from, to, 0, nil)) }},
	})
}

// The layouts hide their engine: a Store has no exported field that a caller could read or
// replace, only its methods.
func TestLayoutStoresHaveNoExportedFields(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[basic.Store](), reflect.TypeFor[advanced.Store](), reflect.TypeFor[chunked.Store]()} {
		for i := range typ.NumField() {
			require.False(t, typ.Field(i).IsExported(), "%s has the exported field %s", typ, typ.Field(i).Name)
		}
		require.True(t, reflect.PointerTo(typ).Implements(reflect.TypeFor[tablets.Store]()), typ.String())
	}
}
