package azurite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

// captureTB is a testing.TB whose Errorf records instead of failing the test, so a test can
// assert that NewTable's Checker reported a violation.
type captureTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (c *captureTB) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func (c *captureTB) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

func entityJSON(t testing.TB, pk, rk string, props int) []byte {
	t.Helper()
	e := map[string]any{"PartitionKey": pk, "RowKey": rk}
	for i := range props {
		e[fmt.Sprintf("p%03d", i)] = i
	}
	b, err := json.Marshal(e)
	require.NoError(t, err)
	return b
}

func TestRoundTrip(t *testing.T) {
	client, checker := NewTable(t, nil)
	ctx := t.Context()

	_, err := client.UpsertEntity(ctx, entityJSON(t, "series", "0001", 3), nil)
	require.NoError(t, err)
	pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: to.Ptr("PartitionKey eq 'series'")})
	var got []map[string]any
	for pager.More() {
		page, err := pager.NextPage(ctx)
		require.NoError(t, err)
		for _, raw := range page.Entities {
			var e map[string]any
			require.NoError(t, json.Unmarshal(raw, &e))
			got = append(got, e)
		}
	}
	require.Len(t, got, 1)
	require.Equal(t, "0001", got[0]["RowKey"])
	require.EqualValues(t, 2, got[0]["p002"])

	st := checker.Stats()
	require.EqualValues(t, 2, st.Requests)
	require.EqualValues(t, 1, st.EntityWrites)
	require.EqualValues(t, 1, st.Queries)
	require.Positive(t, st.EntityBytes)
	require.Empty(t, checker.Violations())

	_, err = client.DeleteEntity(ctx, "series", "0001", nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, checker.Stats().Deletes)

	checker.Reset()
	require.Equal(t, Stats{}, checker.Stats())
}

func TestConnectionString(t *testing.T) {
	srv := Shared(t)
	_, _ = NewTable(t, nil) // the table only serves to prove the listing sees something
	svc, err := aztables.NewServiceClientFromConnectionString(srv.ConnectionString, nil)
	require.NoError(t, err)
	pager := svc.NewListTablesPager(nil)
	n := 0
	for pager.More() {
		page, err := pager.NextPage(t.Context())
		require.NoError(t, err)
		n += len(page.Tables)
	}
	require.Positive(t, n)
}

// failFirst answers 503 to the first request without forwarding it.
type failFirst struct {
	next  policy.Transporter
	calls atomic.Int64
}

func (f *failFirst) Do(req *http.Request) (*http.Response, error) {
	if f.calls.Add(1) == 1 {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Server Busy",
			Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	return f.next.Do(req)
}

func TestCheckerSeesRetries(t *testing.T) {
	ff := &failFirst{}
	client, checker := NewTable(t, &TableOptions{Wrap: func(next policy.Transporter) policy.Transporter {
		ff.next = next
		return ff
	}})
	_, err := client.UpsertEntity(t.Context(), entityJSON(t, "p", "r", 1), nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, ff.calls.Load())
	require.EqualValues(t, 2, checker.Stats().EntityWrites, "the Checker sits below the retry policy")
	require.EqualValues(t, 1, checker.Stats().Calls, "a retried request is one call")

	// Response bytes are what the client read: a point read of the entity returns its JSON.
	before := checker.Stats()
	resp, err := client.GetEntity(t.Context(), "p", "r", nil)
	require.NoError(t, err)
	after := checker.Stats()
	require.EqualValues(t, 1, after.Calls-before.Calls)
	require.GreaterOrEqual(t, after.ResponseBytes-before.ResponseBytes, int64(len(resp.Value)))
	require.Less(t, after.ResponseBytes-before.ResponseBytes, int64(len(resp.Value))+512)
}

func orFilter(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("RowKey eq '%04d'", i)
	}
	return strings.Join(parts, " or ")
}

// TestCheckerOnAzurite sends requests that Azurite accepts (or rejects for other reasons)
// but Azure would reject, and requires that NewTable's Checker reports them.
func TestCheckerOnAzurite(t *testing.T) {
	list := func(opts aztables.ListEntitiesOptions) func(context.Context, *aztables.Client) error {
		return func(ctx context.Context, c *aztables.Client) error {
			_, err := c.NewListEntitiesPager(&opts).NextPage(ctx)
			return err
		}
	}
	upsert := func(pk, rk string, props int) func(context.Context, *aztables.Client) error {
		return func(ctx context.Context, c *aztables.Client) error {
			_, err := c.UpsertEntity(ctx, entityJSON(t, pk, rk, props), nil)
			return err
		}
	}
	add := func(pk, rk string) func(context.Context, *aztables.Client) error {
		return func(ctx context.Context, c *aztables.Client) error {
			_, err := c.AddEntity(ctx, entityJSON(t, pk, rk, 1), nil)
			return err
		}
	}
	tests := []struct {
		name    string
		do      func(context.Context, *aztables.Client) error
		wantErr bool     // Azurite itself rejects the request
		want    []string // substrings of the expected violations, in order; none: no violation
	}{
		{name: "15 comparisons", do: list(aztables.ListEntitiesOptions{Filter: to.Ptr(orFilter(15))})},
		{name: "16 comparisons", do: list(aztables.ListEntitiesOptions{Filter: to.Ptr(orFilter(16))}),
			want: []string{"$filter has 16 comparisons"}},
		{name: "operators in literals", do: list(aztables.ListEntitiesOptions{
			Filter: to.Ptr("RowKey eq 'a eq b or c lt d'' gt e' and " + orFilter(14))})},
		{name: "top 1000", do: list(aztables.ListEntitiesOptions{Top: to.Ptr[int32](1000)})},
		{name: "top 1001", do: list(aztables.ListEntitiesOptions{Top: to.Ptr[int32](1001)}),
			want: []string{"$top is 1001"}},
		{name: "long URL", do: list(aztables.ListEntitiesOptions{Filter: to.Ptr("RowKey eq '" + strings.Repeat("x", 20000) + "'")}),
			wantErr: true, want: []string{"URL is"}},
		{name: "252 properties", do: upsert("p", "r", 252)},
		{name: "253 properties", do: upsert("p", "r", 253), want: []string{"entity has 253 properties"}},
		{name: "hash in RowKey", do: upsert("p", "a#b", 1), wantErr: true,
			want: []string{`URL RowKey "a#b" contains characters Azure forbids in keys: #`, `body RowKey "a#b" contains`}},
		{name: "control char in PartitionKey", do: add("a\x01", "r"), wantErr: true,
			want: []string{`body PartitionKey "a\x01" contains characters Azure forbids in keys: U+0001`}},
		{name: "quote in key", do: upsert("O'Brien", "r", 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctb := &captureTB{TB: t}
			// No retries: a request Azurite drops (the long URL, on a loaded machine) would
			// otherwise be checked, and reported, once per attempt.
			client, checker := NewTable(ctb, &TableOptions{Retry: &policy.RetryOptions{MaxRetries: -1}})
			err := tc.do(t.Context(), client)
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			v := checker.Violations()
			require.Len(t, v, len(tc.want), "violations: %q", v)
			require.Len(t, ctb.Errors(), len(tc.want), "reported: %q", ctb.Errors())
			for i, w := range tc.want {
				require.Contains(t, v[i], w)
				require.Contains(t, ctb.Errors()[i], w)
			}
		})
	}
}

func TestNoErrorfAfterTestEnds(t *testing.T) {
	Shared(t) // skips under -short
	var client *aztables.Client
	var checker *Checker
	var ctb *captureTB
	t.Run("inner", func(t *testing.T) {
		ctb = &captureTB{TB: t}
		client, checker = NewTable(ctb, nil)
	})
	// The inner test has ended (its table is gone): a violation is recorded, not reported.
	_, _ = client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: to.Ptr(orFilter(16))}).NextPage(t.Context())
	require.Len(t, checker.Violations(), 1)
	require.Empty(t, ctb.Errors())
}

func TestCheckerConcurrent(t *testing.T) {
	client, checker := NewTable(t, nil)
	ctx := t.Context()
	const workers, each = 32, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if _, err := client.UpsertEntity(ctx, entityJSON(t, "single", fmt.Sprintf("%02d-%d", w, i), 2), nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var batch []aztables.TransactionAction
	for i := range 100 {
		batch = append(batch, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace,
			Entity: entityJSON(t, "batch", fmt.Sprintf("%03d", i), 2)})
	}
	_, err := client.SubmitTransaction(ctx, batch, nil)
	require.NoError(t, err)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	n := 0
	pager := client.NewListEntitiesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		require.NoError(t, err)
		n += len(page.Entities)
	}
	require.Equal(t, workers*each+100, n)
	st := checker.Stats()
	require.EqualValues(t, workers*each, st.EntityWrites)
	require.EqualValues(t, 1, st.Batches)
	require.EqualValues(t, 100, st.BatchOperations)
	require.Positive(t, st.Queries)
	require.Equal(t, st.EntityWrites+st.Batches+st.Queries, st.Requests)
	require.Empty(t, checker.Violations())
}
