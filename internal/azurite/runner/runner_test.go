package runner

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs Azurite; skipped under -short")
	}
}

func TestStartStop(t *testing.T) {
	skipShort(t)
	srv, err := Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	require.Equal(t, fmt.Sprintf("http://127.0.0.1:%d/devstoreaccount1", srv.Port), srv.Endpoint)
	require.Contains(t, srv.ConnectionString, "TableEndpoint="+srv.Endpoint+";")
	client, err := srv.NewClient("startstop", nil)
	require.NoError(t, err)
	_, err = client.CreateTable(t.Context(), nil)
	require.NoError(t, err)
	svc, err := srv.NewServiceClient(nil)
	require.NoError(t, err)
	page, err := svc.NewListTablesPager(nil).NextPage(t.Context())
	require.NoError(t, err)
	require.Len(t, page.Tables, 1)

	require.NoError(t, srv.Stop())
	require.NoError(t, srv.Stop(), "Stop is idempotent")
	_, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", srv.Port), time.Second)
	require.Error(t, err, "nothing listens after Stop")
}

func TestInstallIsCached(t *testing.T) {
	skipShort(t)
	_, err := Install(t.Context()) // installs if needed
	require.NoError(t, err)
	start := time.Now()
	bin, err := Install(t.Context())
	require.NoError(t, err)
	require.Less(t, time.Since(start), time.Second)
	dir, err := CacheDir()
	require.NoError(t, err)
	require.Equal(t, binPath(dir), bin)
}

func TestDefaultTransportShared(t *testing.T) {
	require.Same(t, DefaultTransport(), DefaultTransport())
}
