package pager

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
)

// cannedTransport answers every request with body (status 200 and a continuation), or with
// the status and body of fail when set.
type cannedTransport struct {
	body   []byte
	status int
}

func (c cannedTransport) Do(req *http.Request) (*http.Response, error) {
	status := c.status
	if status == 0 {
		status = http.StatusOK
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json;odata=minimalmetadata")
	h.Set("Date", "Mon, 30 Nov 2026 01:00:00 GMT")
	h.Set("x-ms-continuation-NextPartitionKey", "np")
	h.Set("x-ms-continuation-NextRowKey", "nr")
	return &http.Response{StatusCode: status, Header: h, Request: req,
		Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body))}, nil
}

func cannedClient(t testing.TB, body []byte, status int, withPolicy bool) *aztables.Client {
	o := &aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: cannedTransport{body, status},
		Retry: policy.RetryOptions{MaxRetries: -1}}}
	if withPolicy {
		o = tablets.ClientOptions(o)
	}
	c, err := aztables.NewClientWithNoCredential("http://127.0.0.1:1/devstoreaccount1/t", o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stagedPage is a page of n entities shaped as staging entities: keys, a few doubles and
// strings, and binary columns (with an escape in a key, and a number in exponent form).
func stagedPage(n, columnBytes int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"odata.metadata":"http://127.0.0.1/devstoreaccount1/$metadata#t","value":[`)
	col := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7, 200, 3}, columnBytes/3))
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"odata.etag":"W/\"datetime'2026-11-30T01%%3A00%%3A00.%07dZ'\"","PartitionKey":"001716422400-00","RowKey":"18ea95edac91e7%02x-9e3779b9-0000\u002d",`+
			`"Timestamp":"2026-11-30T01:00:00.%07dZ","V":1,"A":"00","B":"ff","N":1.5e2,"T":"8000018fa2c130a8","U":"8000018fa2c16b40"`, i, i%256, i)
		for c := range 4 {
			fmt.Fprintf(&b, `,"c%d@odata.type":"Edm.Binary","c%d":"%s"`, c*60, c*60, col)
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// TestFetchWithReplyPolicy: a client with tablets.ClientOptions' policy gives the pager the
// same entities (decoded, property by property), continuation and date as one without.
func TestFetchWithReplyPolicy(t *testing.T) {
	ctx := context.Background()
	body := stagedPage(30, 300)
	q := SubQuery{Filter: "PartitionKey eq 'x'"}
	decode := func(raw [][]byte) []string {
		var out []string
		for _, r := range raw {
			e := entity.Entity{AllowStrings: true}
			if err := e.Decode(r); err != nil {
				t.Fatal(err)
			}
			props := []string{fmt.Sprintf("%s|%s|%s", e.PartitionKey, e.RowKey, e.ETag)}
			for _, p := range e.Props {
				props = append(props, fmt.Sprintf("%s=%v", p.Name, p.Value))
			}
			for _, p := range e.Strings {
				props = append(props, fmt.Sprintf("%s=%s", p.Name, p.Value))
			}
			slices.Sort(props[1:]) // the SDK encodes the properties again in its own order
			out = append(out, strings.Join(props, "|"))
		}
		return out
	}
	sdk, sdkNext, sdkDate, err := FetchDated(ctx, cannedClient(t, body, 0, false), q, 0, Continuation{})
	if err != nil {
		t.Fatal(err)
	}
	fast, fastNext, fastDate, err := FetchDated(ctx, cannedClient(t, body, 0, true), q, 0, Continuation{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fast) != 30 || sdkNext != fastNext || fastNext != (Continuation{"np", "nr"}) || !sdkDate.Equal(fastDate) || fastDate.IsZero() {
		t.Fatalf("with the policy: %d entities, next %v, date %v; without: next %v, date %v", len(fast), fastNext, fastDate, sdkNext, sdkDate)
	}
	a, b := decode(sdk), decode(fast)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("entity %d:\nwithout the policy %s\nwith it            %s", i, a[i], b[i])
		}
	}
	// The entities the SDK encodes again differ in their bytes (its key order, its escapes):
	// the policy's are the reply's own.
	if !bytes.Contains(body, fast[0]) {
		t.Errorf("entity 0 is not the reply's bytes: %s", fast[0])
	}

	// A reply that is not an entity list is left to the SDK and rejected as before; an
	// empty list is an empty page; an error status is the SDK's error.
	for _, c := range []struct {
		body   string
		status int
		want   string // "" for no error
	}{
		{`{"value":[]}`, 0, ""},
		{`{"something":"else"}`, 0, "not an entity list"},
		{`{"value":[{"a":1}]`, 0, "unmarshalling"},
		{`{"odata.error":{"code":"InternalError"}}`, http.StatusInternalServerError, "InternalError"},
	} {
		for _, with := range []bool{false, true} {
			got, _, _, err := FetchDated(ctx, cannedClient(t, []byte(c.body), c.status, with), q, 0, Continuation{})
			if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) || len(got) != 0 {
				t.Errorf("reply %s (policy %v): %d entities, error %v; want %q", c.body, with, len(got), err, c.want)
			}
		}
	}

	// Replies to callers that do not ask for the entities (aztables' own pager) stay whole.
	pager := cannedClient(t, body, 0, true).NewListEntitiesPager(nil)
	page, err := pager.NextPage(ctx)
	if err != nil || len(page.Entities) != 30 {
		t.Fatalf("an SDK pager through the policy: %d entities, %v", len(page.Entities), err)
	}
}

// BenchmarkFetchReply is the time (all CPU: one goroutine, no network) of a page of 1,000 staged entities (about 8 MB, a page of
// a panel's first load) fetched and split into its entities, through aztables' decoding
// and through tablets.ClientOptions' policy; no network (a canned reply).
func BenchmarkFetchReply(b *testing.B) {
	body := stagedPage(1000, 1500)
	for _, c := range []struct {
		name string
		with bool
	}{{"sdk", false}, {"policy", true}} {
		b.Run(c.name, func(b *testing.B) {
			client := cannedClient(b, body, 0, c.with)
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				got, _, err := Fetch(context.Background(), client, SubQuery{}, 0, Continuation{})
				if err != nil || len(got) != 1000 {
					b.Fatal(len(got), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/page")
		})
	}
}
