package reqlimit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

// Point reads of every class are counted in the histogram by the time they held their slot
// (synctest's clock: the time the account took); listings and writes are not.
func TestTransportPointReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const fast, slow = "/acct/logs(PartitionKey='a',RowKey='b')", "/acct/logs(PartitionKey='a',RowKey='c')"
		next := &timedNext{took: map[string]time.Duration{fast: time.Millisecond, slow: 200 * time.Millisecond,
			"/acct/logs()": 300 * time.Millisecond, "/acct/$batch": 300 * time.Millisecond}}
		tr := New(next, 16)
		do := func(ctx context.Context, method, path string) {
			sendWhole(t, tr, ctx, method, "http://account.invalid"+path)
		}
		do(context.Background(), http.MethodGet, fast)
		do(Background(context.Background()), http.MethodGet, fast)
		do(Ingest(context.Background()), http.MethodGet, slow)
		do(context.Background(), http.MethodGet, "/acct/logs()")  // a listing
		do(context.Background(), http.MethodPost, "/acct/$batch") // a transaction
		do(context.Background(), http.MethodDelete, slow)         // not a read
		got := tr.PointReads()
		if got.Count() != 3 || got.Sum != 202*time.Millisecond {
			t.Fatalf("PointReads() = %d reads taking %v, want 3 taking 202ms", got.Count(), got.Sum)
		}
		if len(got.Counts) != len(PointReadBuckets)+1 {
			t.Fatalf("%d counts for %d bounds", len(got.Counts), len(PointReadBuckets))
		}
		for i, n := range got.Counts {
			want := int64(0)
			switch {
			case i == 0: // up to 1 ms: the two fast reads
				want = 2
			case PointReadBuckets[i-1] < 200*time.Millisecond && i < len(PointReadBuckets) && 200*time.Millisecond <= PointReadBuckets[i]:
				want = 1
			}
			if n != want {
				t.Errorf("bucket %d: %d reads, want %d", i, n, want)
			}
		}
	})
}

// A point read's time is split into its phases as the HTTP client saw them: the account's
// wait before its answer's first byte goes to the answer phase, a body sent slowly to the
// body phase. (Real time over a real connection: the phases are checked against what the
// handler waited at least, never at most.)
func TestTransportPointReadPhases(t *testing.T) {
	const answerWait, bodyWait = 30 * time.Millisecond, 20 * time.Millisecond
	account := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(answerWait)
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"PartitionKey":`)
		w.(http.Flusher).Flush()
		time.Sleep(bodyWait)
		io.WriteString(w, `"a"}`)
	}))
	defer account.Close()
	tr := New(account.Client(), 4)
	for _, path := range []string{"/acct/logs(PartitionKey='a',RowKey='b')", "/acct/logs()"} {
		sendWhole(t, tr, context.Background(), http.MethodGet, account.URL+path)
	}
	whole, phases := tr.PointReads(), tr.PointReadPhases()
	if whole.Count() != 1 || whole.Sum < answerWait+bodyWait {
		t.Fatalf("PointReads() = %d taking %v, want 1 taking %v or more", whole.Count(), whole.Sum, answerWait+bodyWait)
	}
	for i, s := range phases {
		if s.Count() != 1 {
			t.Fatalf("phase %s: %d point reads, want 1", PhaseNames[i], s.Count())
		}
	}
	if got := phases[PhaseAnswer].Sum; got < answerWait {
		t.Errorf("answer phase %v, want %v or more (the account's wait)", got, answerWait)
	}
	if got := phases[PhaseBody].Sum; got < bodyWait {
		t.Errorf("body phase %v, want %v or more (the body sent slowly)", got, bodyWait)
	}
	if sum := phases[PhaseConnection].Sum + phases[PhaseAnswer].Sum + phases[PhaseBody].Sum; sum > whole.Sum {
		t.Errorf("the phases add up to %v, more than the whole read's %v", sum, whole.Sum)
	}
}

// sendWhole sends a request of method to url through tr and reads its answer to the end.
func sendWhole(t *testing.T, tr *Transport, ctx context.Context, method, url string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
