package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/reqlimit"
)

type bodyTransport string

func (b bodyTransport) Do(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(string(b)))}, nil
}

// The table meter counts each request under its class, its background task and the role of
// the table its path names, Azurite's (the account in the path) and Azure's alike, with the
// bytes of the response once read.
func TestTableMeter(t *testing.T) {
	m := &tableMeter{next: bodyTransport("12345")}
	send := func(ctx context.Context, url string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := m.Do(req)
		require.NoError(t, err)
		_, err = io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	bg := reqlimit.Background(context.Background())
	send(context.Background(), "http://127.0.0.1:10002/devstoreaccount1/soak0w()?$filter=x")
	send(context.Background(), "https://a.table.core.windows.net/soak0w()")
	send(bg, "https://a.table.core.windows.net/soak0r1764547200(PartitionKey='a',RowKey='b')")
	send(reqlimit.WithTask(bg, "fold"), "https://a.table.core.windows.net/$batch")
	send(reqlimit.WithTask(bg, "compact"), "https://a.table.core.windows.net/$batch")
	send(reqlimit.WithTask(bg, "compact"), "https://a.table.core.windows.net/$batch")
	send(reqlimit.Ingest(context.Background()), "http://127.0.0.1:10002/devstoreaccount1/$batch")
	send(context.Background(), "https://a.table.core.windows.net/soak0t600p1764547200()")
	send(context.Background(), "https://a.table.core.windows.net/Tables")

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	want := `
# HELP tablets_account_table_requests_total Requests to the storage account by class, background task (fold, compact, rollup, flagged, retain) and the role of the table they name (staging, raw, tier, index, histograms, catalog, answers; batch: a transaction; tables: the table service's).
# TYPE tablets_account_table_requests_total counter
tablets_account_table_requests_total{class="background",table="batch",task="compact"} 2
tablets_account_table_requests_total{class="background",table="batch",task="fold"} 1
tablets_account_table_requests_total{class="background",table="raw",task=""} 1
tablets_account_table_requests_total{class="ingest",table="batch",task=""} 1
tablets_account_table_requests_total{class="query",table="staging",task=""} 2
tablets_account_table_requests_total{class="query",table="tables",task=""} 1
tablets_account_table_requests_total{class="query",table="tier",task=""} 1
# HELP tablets_account_table_received_bytes_total Response body bytes from the storage account by class, background task and table role.
# TYPE tablets_account_table_received_bytes_total counter
tablets_account_table_received_bytes_total{class="background",table="batch",task="compact"} 10
tablets_account_table_received_bytes_total{class="background",table="batch",task="fold"} 5
tablets_account_table_received_bytes_total{class="background",table="raw",task=""} 5
tablets_account_table_received_bytes_total{class="ingest",table="batch",task=""} 5
tablets_account_table_received_bytes_total{class="query",table="staging",task=""} 10
tablets_account_table_received_bytes_total{class="query",table="tables",task=""} 5
tablets_account_table_received_bytes_total{class="query",table="tier",task=""} 5
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"tablets_account_table_requests_total", "tablets_account_table_received_bytes_total"))
}
