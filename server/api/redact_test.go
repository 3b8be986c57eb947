package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"
)

// sasSig is the signature of the SAS token in the tests: base64 with +, / and = percent-
// encoded, as it appears in a URL.
const sasSig = "c2VjcmV0U2lnbmF0dXJlLW5vdC10by1sZWFr%2B%2F%3D"

const sasQuery = "sv=2019-02-02&ss=t&srt=sco&sp=rl&se=2030-01-01T00:00:00Z&st=2020-01-01T00:00:00Z&spr=https&sig=" + sasSig

// fakeTransport answers every request of an aztables client: with err (as net/http's client
// fails: a *url.Error quoting the whole URL), or with a 403 whose body quotes the URL.
type fakeTransport struct{ fail bool }

func (f fakeTransport) Do(req *http.Request) (*http.Response, error) {
	if f.fail {
		return nil, &url.Error{Op: "Get", URL: req.URL.String(), Err: errors.New("dial tcp 10.0.0.1:443: connect: connection refused")}
	}
	body := `{"odata.error":{"code":"AuthenticationFailed","message":{"lang":"en-US","value":"Server failed to authenticate the request. URL: ` + req.URL.String() + `"}}}`
	return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Request: req,
		Header: http.Header{"Content-Type": {"application/json"}, "X-Ms-Error-Code": {"AuthenticationFailed"}},
		Body:   io.NopCloser(strings.NewReader(body))}, nil
}

// accountError is what listing a table over a SAS URL fails with through transport t.
func accountError(t *testing.T, tr fakeTransport) error {
	c, err := aztables.NewClientWithNoCredential("https://acct.table.core.windows.net/metrics?"+sasQuery,
		&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: tr, Retry: policy.RetryOptions{MaxRetries: -1}}})
	require.NoError(t, err)
	_, err = c.NewListEntitiesPager(nil).NextPage(context.Background())
	require.Error(t, err)
	return err
}

// TestErrorNeverEchoesSecret: an account error quoting a SAS URL reaches the client of every
// endpoint with its signature redacted, and still says what failed.
func TestErrorNeverEchoesSecret(t *testing.T) {
	secret := strings.TrimSuffix(sasSig, "%2B%2F%3D")
	// An unreachable account is unavailable (503); the account's refusal, an execution error.
	want := map[string]int{"transport error": http.StatusServiceUnavailable, "response error": http.StatusUnprocessableEntity}
	for name, tr := range map[string]fakeTransport{"transport error": {fail: true}, "response error": {}} {
		t.Run(name, func(t *testing.T) {
			accErr := accountError(t, tr)
			require.Contains(t, accErr.Error(), secret, "the test's error must carry the secret")
			m := testStore()
			m.selectErr = accErr
			// Answered at once: the unreachable account is never back here.
			_, srv := newServer(t, m, &Options{RetryPause: -1})
			for _, path := range []string{"/api/v1/query", "/api/v1/query_range", "/api/v1/series"} {
				code, r, body := do(t, srv, http.MethodGet, path, url.Values{"query": {"up"}, "match[]": {"up"},
					"start": {ts(t0)}, "end": {ts(t0 + 60)}, "step": {"15"}})
				require.Equal(t, want[name], code, "%s: %s", path, body)
				require.NotContains(t, string(body), secret)
				require.NotContains(t, r.Error, secret)
				require.Contains(t, r.Error, "sig=REDACTED")
				require.Contains(t, r.Error, "acct.table.core.windows.net/metrics")
			}
			// Nor as a warning of a query that succeeds.
			m = testStore()
			m.warning = accErr
			_, srv = newServer(t, m, nil)
			r := ok(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}, "time": {ts(t0)}})
			require.Len(t, r.Warnings, 1)
			require.NotContains(t, r.Warnings[0], secret)
			require.Contains(t, r.Warnings[0], "sig=REDACTED")
		})
	}
}
