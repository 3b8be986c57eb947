package azurite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/internal/reply"
)

// SharedStartTimeout bounds the first [Shared] call: a fresh install plus startup.
var SharedStartTimeout = 10 * time.Minute

var shared struct {
	once sync.Once
	mu   sync.Mutex
	srv  *Server
	err  error
}

// Main is the body of a TestMain for packages that use [Shared] or [NewTable]:
//
//	func TestMain(m *testing.M) { azurite.Main(m) }
//
// It runs the tests, stops the shared Azurite if one was started, and exits.
func Main(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	srv := shared.srv
	shared.mu.Unlock()
	if srv != nil {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Shared returns the test process's Azurite, starting it on first use. Under -short it
// skips the test; if Azurite cannot be installed or started it fails the test (every test
// that asks), never skips. Without [Main] the server is not stopped explicitly (on Linux it
// dies with the test process).
func Shared(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs Azurite; skipped under -short")
	}
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), SharedStartTimeout)
		defer cancel()
		srv, err := Start(ctx)
		shared.mu.Lock()
		shared.srv, shared.err = srv, err
		shared.mu.Unlock()
	})
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.err != nil {
		t.Fatalf("start Azurite: %v", shared.err)
	}
	return shared.srv
}

// TableOptions configures [NewTable]. The zero value (or nil) is fine.
type TableOptions struct {
	// Wrap, if set, is inserted between the Checker and the network: the client sends
	// Checker -> Wrap(next) -> next, where next is [DefaultTransport]. Use it for fault
	// injection.
	Wrap func(next policy.Transporter) policy.Transporter
	// Retry is the client's retry policy; nil means fast retries suited to tests
	// ([TestRetryOptions]). The retry policy sits above the transport, so the Checker sees
	// (and counts) every attempt.
	Retry *policy.RetryOptions
	// CountOnly makes the client's Checker a counter that checks nothing ([NewCounter]):
	// for benchmarks.
	CountOnly bool
}

// TestRetryOptions are the retries [NewTable] uses by default: the SDK's status codes,
// but 5 retries 5 ms to 100 ms apart instead of 3 retries 0.8 s to 60 s apart.
func TestRetryOptions() policy.RetryOptions {
	return policy.RetryOptions{MaxRetries: 5, RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond}
}

// NewTable creates a fresh, uniquely named table on the [Shared] Azurite and returns a
// client for it whose transport is a [Checker] reporting violations with t.Errorf (until
// the test ends; they are recorded regardless). The table is deleted when the test ends.
// Table creation and deletion bypass the Checker, so its [Stats] start at zero.
func NewTable(t testing.TB, opts *TableOptions) (*aztables.Client, *Checker) {
	t.Helper()
	srv := Shared(t)
	if opts == nil {
		opts = &TableOptions{}
	}

	// Registered first so it runs last: after it no more t.Errorf.
	var reportMu sync.Mutex
	ended := false
	t.Cleanup(func() {
		reportMu.Lock()
		ended = true
		reportMu.Unlock()
	})
	report := func(v string) {
		reportMu.Lock()
		defer reportMu.Unlock()
		if !ended {
			t.Errorf("Azure limit violated: %s", v)
		}
	}

	var next policy.Transporter = DefaultTransport()
	if opts.Wrap != nil {
		next = opts.Wrap(next)
	}
	checker := NewChecker(next, report)
	if opts.CountOnly {
		checker = NewCounter(next)
	}
	retry := TestRetryOptions()
	if opts.Retry != nil {
		retry = *opts.Retry
	}

	name := NewTableName()
	admin, err := srv.NewClient(name, &aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: DefaultTransport(), Retry: TestRetryOptions()}})
	if err != nil {
		t.Fatalf("azurite: client for table %s: %v", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.CreateTable(ctx, nil); err != nil {
		t.Fatalf("azurite: create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := admin.Delete(ctx, nil)
		var re *azcore.ResponseError
		if err != nil && !(errors.As(err, &re) && re.StatusCode == http.StatusNotFound) {
			t.Errorf("azurite: delete table %s: %v", name, err)
		}
	})

	// The request ID is stamped once per call, above the retry policy, so that the Checker
	// counts a retried request as one call (Stats.Calls).
	client, err := srv.NewClient(name, &aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: checker, Retry: retry, PerCallPolicies: []policy.Policy{runtime.NewRequestIDPolicy(), reply.Policy{}}}})
	if err != nil {
		t.Fatalf("azurite: client for table %s: %v", name, err)
	}
	return client, checker
}

// NewTableName returns a random valid table name: "t" and 16 hex digits.
func NewTableName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}
