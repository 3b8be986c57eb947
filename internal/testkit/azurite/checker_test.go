package azurite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"
)

func TestCountComparisons(t *testing.T) {
	tests := []struct {
		filter string
		want   int
	}{
		{"", 0},
		{"PartitionKey eq 'a'", 1},
		{"PartitionKey eq 'a' and RowKey ge '1' and RowKey lt '2'", 3},
		{"(A gt 1) or (B le 2) or not (C ne 3)", 3},
		{"PartitionKey eq 'x eq y lt z'", 1},
		{"PartitionKey eq 'O''Brien eq ''' and RowKey ne 'b'", 2},
		{"Time ge datetime'2020-01-01T00:00:00Z'", 1},
		{"equal eq 1 and legit le 2 and Eq eq 3", 3}, // whole lowercase words only
		{"A eq 'unterminated eq", 1},
		{orFilter(16), 16},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, CountComparisons(tc.filter), tc.filter)
	}
}

func TestKeyProblems(t *testing.T) {
	tests := []struct {
		key  string
		want string // substring of the only problem; "" for none
	}{
		{"series-1", ""},
		{"O'Brien", ""},
		{"héllo wörld", ""},
		{strings.Repeat("k", 512), ""},
		{strings.Repeat("k", 513), "is 1026 bytes as UTF-16, limit 1024"},
		{strings.Repeat("温", 512), ""},
		{strings.Repeat("🙂", 257), "is 1028 bytes as UTF-16, limit 1024"},
		{strings.Repeat("é", 513), "is 1026 bytes"},
		{"a/b", "forbids in keys: /"},
		{`a\b`, `forbids in keys: \`},
		{"a#b", "forbids in keys: #"},
		{"a?b", "forbids in keys: ?"},
		{"a\tb", "U+0009"},
		{"a\x7fb", "U+007F"},
		{"a\u0085b", "U+0085"},
		{"a\u00a0b", ""},
	}
	for _, tc := range tests {
		p := KeyProblems("RowKey", tc.key)
		if tc.want == "" {
			require.Empty(t, p, "%q", tc.key)
			continue
		}
		require.Len(t, p, 1, "%q", tc.key)
		require.Contains(t, p[0], tc.want)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		method, url string
		want        requestKind
		table       string
	}{
		{"GET", "http://h/devstoreaccount1/tbl()?$filter=x", kindQuery, "tbl"},
		{"GET", "http://h/devstoreaccount1/tbl(PartitionKey='a',RowKey='b')", kindQuery, "tbl"},
		{"POST", "http://h/devstoreaccount1/tbl", kindEntityWrite, "tbl"},
		{"PUT", "http://h/devstoreaccount1/tbl(PartitionKey='a%2Fb',RowKey='(x)')", kindEntityWrite, "tbl"},
		{"PATCH", "https://acct.table.core.windows.net/tbl(PartitionKey='a',RowKey='b')", kindEntityWrite, "tbl"},
		{"MERGE", "http://h/devstoreaccount1/tbl(PartitionKey='a',RowKey='b')", kindEntityWrite, "tbl"},
		{"DELETE", "http://h/devstoreaccount1/tbl(PartitionKey='a',RowKey='b')", kindDelete, "tbl"},
		{"POST", "http://h/devstoreaccount1/$batch", kindBatch, "$batch"},
		{"POST", "http://h/devstoreaccount1/Tables", kindOther, "Tables"},
		{"DELETE", "http://h/devstoreaccount1/Tables('tbl')", kindOther, "Tables"},
		{"GET", "http://h/devstoreaccount1/Tables?$filter=TableName eq 'x'", kindOther, "Tables"},
		{"GET", "http://h/devstoreaccount1/?restype=service&comp=properties", kindOther, ""},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.url)
		require.NoError(t, err)
		got := classify(tc.method, u)
		require.Equal(t, tc.want, got.kind, "%s %s", tc.method, tc.url)
		require.Equal(t, tc.table, got.table, "%s %s", tc.method, tc.url)
	}
	pk, rk, err := urlKeys("(PartitionKey='a%2Fb''c',RowKey='%23%20x')")
	require.NoError(t, err)
	require.Equal(t, "a/b'c", pk)
	require.Equal(t, "# x", rk)
}

// recorder is a next transport that records each request's body, checks that the Checker
// restored it (Body, GetBody and ContentLength agree), and fails the request.
type recorder struct {
	mu       sync.Mutex
	bodies   [][]byte
	problems []string
}

var errNotSent = errors.New("recorder: not sent")

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b []byte
	if req.Body != nil {
		var err error
		if b, err = io.ReadAll(req.Body); err != nil {
			r.problems = append(r.problems, err.Error())
		}
	}
	if int64(len(b)) != req.ContentLength {
		r.problems = append(r.problems, fmt.Sprintf("body %d bytes, ContentLength %d", len(b), req.ContentLength))
	}
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			r.problems = append(r.problems, err.Error())
		} else if again, _ := io.ReadAll(rc); !bytes.Equal(again, b) {
			r.problems = append(r.problems, "GetBody differs from Body")
		}
	}
	r.bodies = append(r.bodies, b)
	return nil, errNotSent
}

// fakeClient returns a client whose requests go through a Checker to a recorder, never to a
// network.
func fakeClient(t *testing.T) (*aztables.Client, *Checker, *recorder) {
	rec := &recorder{}
	checker := NewChecker(rec, nil)
	cred, err := aztables.NewSharedKeyCredential(AccountName, AccountKey)
	require.NoError(t, err)
	client, err := aztables.NewClientWithSharedKey("http://127.0.0.1:9/devstoreaccount1/tbl", cred,
		&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: checker, Retry: policy.RetryOptions{MaxRetries: -1}}})
	require.NoError(t, err)
	return client, checker, rec
}

func action(t *testing.T, typ aztables.TransactionType, pk, rk string, props int) aztables.TransactionAction {
	return aztables.TransactionAction{ActionType: typ, Entity: entityJSON(t, pk, rk, props)}
}

func TestCheckerBatch(t *testing.T) {
	many := func(n int, pk func(i int) string) []aztables.TransactionAction {
		var a []aztables.TransactionAction
		for i := range n {
			a = append(a, action(t, aztables.TransactionTypeInsertReplace, pk(i), fmt.Sprintf("%04d", i), 2))
		}
		return a
	}
	same := func(int) string { return "p" }
	big := func(rk string) aztables.TransactionAction {
		b, err := json.Marshal(map[string]any{"PartitionKey": "p", "RowKey": rk, "S": strings.Repeat("x", 900_000)})
		require.NoError(t, err)
		return aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: b}
	}
	tests := []struct {
		name    string
		actions []aztables.TransactionAction
		want    []string // regular expressions matching the violations, in order
	}{
		{name: "valid", actions: []aztables.TransactionAction{
			action(t, aztables.TransactionTypeAdd, "p", "1", 3),
			action(t, aztables.TransactionTypeInsertMerge, "p", "2", 3),
			action(t, aztables.TransactionTypeUpdateReplace, "p", "3", 3),
			action(t, aztables.TransactionTypeDelete, "p", "4", 0),
		}},
		{name: "100 operations", actions: many(100, same)},
		{name: "101 operations", actions: many(101, same), want: []string{`batch has 101 operations, limit 100$`}},
		{name: "two partitions", actions: many(4, func(i int) string { return fmt.Sprint("p", i/2) }),
			want: []string{`operation 2 has PartitionKey "p1", operation 0 has "p0": a batch must target ONE partition$`}},
		{name: "three partitions", actions: many(3, func(i int) string { return fmt.Sprint("p", i) }),
			want: []string{`ONE partition`, `batch spans 3 partitions$`}},
		{name: "duplicate entity", actions: []aztables.TransactionAction{
			action(t, aztables.TransactionTypeInsertReplace, "p", "1", 1),
			action(t, aztables.TransactionTypeDelete, "p", "1", 0),
		}, want: []string{`operations 0 and 1 both target entity \("p", "1"\)`}},
		{name: "bad key in delete", actions: []aztables.TransactionAction{
			action(t, aztables.TransactionTypeDelete, "p", "a#b", 0),
		}, want: []string{`operation 0: DELETE http://\S+/tbl\(PartitionKey='p',RowKey='a%23b'\)\S*: URL RowKey "a#b" contains characters Azure forbids in keys: #$`}},
		{name: "too many properties", actions: []aztables.TransactionAction{
			action(t, aztables.TransactionTypeAdd, "p", "1", 252),
			action(t, aztables.TransactionTypeInsertMerge, "p", "2", 253),
		}, want: []string{`operation 1: PATCH .*: entity has 253 properties`}},
		{name: "body over 4 MiB", actions: []aztables.TransactionAction{big("1"), big("2"), big("3"), big("4"), big("5")},
			want: []string{`batch body is \d+ bytes, limit 4194304$`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, checker, rec := fakeClient(t)
			_, err := client.SubmitTransaction(t.Context(), tc.actions, nil)
			require.ErrorIs(t, err, errNotSent)
			require.Empty(t, rec.problems)
			require.Len(t, rec.bodies, 1)

			v := checker.Violations()
			require.Len(t, v, len(tc.want), "violations: %q", v)
			for i, w := range tc.want {
				require.Regexp(t, w, v[i])
				require.True(t, strings.HasPrefix(v[i], "POST http://127.0.0.1:9/devstoreaccount1/$batch: "), v[i])
			}
			st := checker.Stats()
			require.EqualValues(t, 1, st.Requests)
			require.EqualValues(t, 1, st.Batches)
			require.EqualValues(t, len(tc.actions), st.BatchOperations)

			var want int64 // the JSON bodies of the sub-requests: the entities of non-deletes
			for _, a := range tc.actions {
				if a.ActionType != aztables.TransactionTypeDelete {
					var m map[string]any
					require.NoError(t, json.Unmarshal(a.Entity, &m))
					b, err := json.Marshal(m) // aztables re-marshals the entity
					require.NoError(t, err)
					want += int64(len(b))
				}
			}
			require.Equal(t, want, st.EntityBytes)
		})
	}
}

func TestCheckerSingleRequests(t *testing.T) {
	tests := []struct {
		name string
		do   func(*aztables.Client) error
		want []string
		kind func(Stats) int64
	}{
		{name: "update with slash", do: func(c *aztables.Client) error {
			_, err := c.UpdateEntity(t.Context(), entityJSON(t, "a/b", "r", 1), nil)
			return err
		}, want: []string{`URL PartitionKey "a/b" contains`, `body PartitionKey "a/b" contains`},
			kind: func(s Stats) int64 { return s.EntityWrites }},
		{name: "insert without RowKey", do: func(c *aztables.Client) error {
			_, err := c.AddEntity(t.Context(), []byte(`{"PartitionKey":"p","RowKey":1}`), nil)
			return err
		}, want: []string{"RowKey in body is not a string"}, kind: func(s Stats) int64 { return s.EntityWrites }},
		{name: "bad property names", do: func(c *aztables.Client) error {
			_, err := c.UpsertEntity(t.Context(), []byte(`{"PartitionKey":"p","RowKey":"r","1x":1,"a-b":2,"ok_1":3,"ok@odata.type":"Edm.Int64"}`), nil)
			return err
		}, want: []string{`invalid property names`}, kind: func(s Stats) int64 { return s.EntityWrites }},
		{name: "entity over 1 MiB", do: func(c *aztables.Client) error {
			b, _ := json.Marshal(map[string]any{"PartitionKey": "p", "RowKey": "r", "S": strings.Repeat("x", 1<<20)})
			_, err := c.UpsertEntity(t.Context(), b, nil)
			return err
		}, want: []string{"entity body is 1048"}, kind: func(s Stats) int64 { return s.EntityWrites }},
		{name: "delete with control char", do: func(c *aztables.Client) error {
			_, err := c.DeleteEntity(t.Context(), "p", "a\nb", nil)
			return err
		}, want: []string{`URL RowKey "a\nb" contains characters Azure forbids in keys: U+000A`},
			kind: func(s Stats) int64 { return s.Deletes }},
		{name: "get entity", do: func(c *aztables.Client) error {
			_, err := c.GetEntity(t.Context(), "p", "r", nil)
			return err
		}, kind: func(s Stats) int64 { return s.Queries }},
		{name: "create table", do: func(c *aztables.Client) error {
			_, err := c.CreateTable(t.Context(), nil)
			return err
		}, kind: func(s Stats) int64 { return s.Other }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, checker, rec := fakeClient(t)
			require.ErrorIs(t, tc.do(client), errNotSent)
			require.Empty(t, rec.problems)
			v := checker.Violations()
			require.Len(t, v, len(tc.want), "violations: %q", v)
			for i, w := range tc.want {
				require.Contains(t, v[i], w)
			}
			require.EqualValues(t, 1, checker.Stats().Requests)
			require.EqualValues(t, 1, tc.kind(checker.Stats()))
		})
	}
}
