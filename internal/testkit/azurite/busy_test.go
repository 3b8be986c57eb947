package azurite

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// sleepyTransport answers every request after the delay its URL's path names.
type sleepyTransport struct{}

func (sleepyTransport) Do(req *http.Request) (*http.Response, error) {
	d, err := time.ParseDuration(strings.TrimPrefix(req.URL.Path, "/"))
	if err != nil {
		return nil, err
	}
	time.Sleep(d)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// TestCheckerBusy: Stats.Busy is the time at least one request was under way, overlapping
// requests counted once, the time between them not at all; Reset starts it again.
func TestCheckerBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCounter(sleepyTransport{})
		send := func(d time.Duration) {
			req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1/"+d.String(), nil)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := c.Do(req); err != nil {
				t.Error(err)
			}
		}
		// 0 to 30 ms and 10 to 50 ms overlap: 50 ms busy; then 100 ms idle; then 20 ms.
		var wg sync.WaitGroup
		wg.Go(func() { send(30 * time.Millisecond) })
		time.Sleep(10 * time.Millisecond)
		wg.Go(func() { send(40 * time.Millisecond) })
		wg.Wait()
		time.Sleep(100 * time.Millisecond)
		send(20 * time.Millisecond)
		if got := c.Stats().Busy; got != 70*time.Millisecond {
			t.Errorf("busy %v, want 70ms", got)
		}
		// A request under way counts up to now.
		c.Reset()
		wg.Go(func() { send(50 * time.Millisecond) })
		time.Sleep(20 * time.Millisecond)
		if got := c.Stats().Busy; got != 20*time.Millisecond {
			t.Errorf("busy %v while a request is under way, want 20ms", got)
		}
		wg.Wait()
		if got := c.Stats().Busy; got != 50*time.Millisecond {
			t.Errorf("busy %v after Reset, want 50ms", got)
		}
	})
}
