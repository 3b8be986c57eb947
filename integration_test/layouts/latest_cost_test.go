package layouts

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/internal/testkit/storetest"
)

// BenchmarkLatestHistory reads Latest(1) and Latest(100) of the cost tests' fixed histories
// (storetest.LatestHistories: a day at 1 Hz in 2025 with fixed-seed values, a point a day
// through 2024-25) on each layout and on a database, and reports the requests and response
// bytes of one call. Compare a change with:
//
//	go test -run '^$' -bench LatestHistory -count 6 ./integration_test/layouts/ | tee new.txt
//	benchstat old.txt new.txt
func BenchmarkLatestHistory(b *testing.B) {
	for _, layout := range []string{"basic", "advanced", "chunked", "tsdb"} {
		b.Run(layout, func(b *testing.B) {
			store, stats := latestFixture(b, layout)
			for _, hist := range storetest.LatestHistories() {
				for _, n := range []int{1, 100} {
					b.Run(fmt.Sprintf("%s/%d", hist.Name, n), func(b *testing.B) {
						before := stats()
						for b.Loop() {
							pts, err := store.Latest(context.Background(), hist.Name, n)
							if err != nil || len(pts) != n || !pts[0].Time.Equal(hist.Points[len(hist.Points)-1].Time) {
								b.Fatal(len(pts), err)
							}
						}
						after := stats()
						b.ReportMetric(float64(after.Calls-before.Calls)/float64(b.N), "requests/op")
						b.ReportMetric(float64(after.ResponseBytes-before.ResponseBytes)/float64(b.N), "resp-bytes/op")
					})
				}
			}
		})
	}
}

// latestWritten records the layouts' fixtures that hold the histories already (they are
// kept for the whole run, as fixture's are).
var latestWritten sync.Map

// latestFixture is a store of layout ("tsdb": a database, dropped when b ends) holding every
// one of storetest.LatestHistories, and its client's counts.
func latestFixture(b *testing.B, layout string) (tablets.Store, func() azurite.Stats) {
	if layout == "tsdb" {
		db, _, checker := dbtest.NewDB(b, nil)
		writeHistories(b, db)
		return db, checker.Stats
	}
	f := fixture(b, layout+"/latest-history", layout, 0, nil)
	if _, done := latestWritten.LoadOrStore(layout, true); !done {
		writeHistories(b, f.store)
	}
	return f.store, f.checker.Stats
}

func writeHistories(b *testing.B, store tablets.Store) {
	for _, hist := range storetest.LatestHistories() {
		require.NoError(b, store.Write(context.Background(), hist.Name, hist.Points...))
	}
}

// A point written between Latest's listing of a window's keys and its read of the newest
// entities (a new row or chunk above those listed) is found: the read is cut short by its
// $top, and the window is listed again.
func TestLatestSeesWriteBetweenKeysAndRows(t *testing.T) {
	for _, h := range itest.Stores {
		if h.Name() != "advanced" && h.Name() != "chunked" {
			continue
		}
		t.Run(h.Name(), func(t *testing.T) {
			ctx := context.Background()
			hist := storetest.LatestHistories()[0] // a day at 1 Hz in 2025
			late := tablets.Point{Time: hist.Points[len(hist.Points)-1].Time.Add(10 * time.Minute), Value: -1}
			var store tablets.Store
			var once sync.Once
			written := false
			hook := func(req *http.Request, body []byte) {
				sel := req.URL.Query().Get("$select")
				keysOnly := req.Method == http.MethodGet && sel != "" && !strings.HasSuffix(sel, ",C")
				if !keysOnly || !bytes.Contains(body, []byte(`"RowKey"`)) {
					return
				}
				once.Do(func() {
					require.NoError(t, store.Write(ctx, hist.Name, late))
					written = true
				})
			}
			client, _ := azurite.NewTable(t, &azurite.TableOptions{Wrap: func(next policy.Transporter) policy.Transporter {
				return itest.ReplyHook{Next: next, Hook: hook}
			}})
			store = h.Make(t, client)
			require.NoError(t, store.Write(ctx, hist.Name, hist.Points...)) // no keys-only reads
			got, err := store.Latest(ctx, hist.Name, 100)
			require.NoError(t, err)
			require.True(t, written, "the hook wrote during Latest")
			want := append([]tablets.Point{late}, hist.Points[len(hist.Points)-99:]...)
			slices.Reverse(want[1:])
			require.Len(t, got, 100)
			for i := range want {
				require.True(t, want[i].Time.Equal(got[i].Time) && want[i].Value == got[i].Value, "point %d: want %v, got %v", i, want[i], got[i])
			}
		})
	}
}
