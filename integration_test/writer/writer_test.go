package writer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/writer"
)

// The buffered Writer over each real store: a collector adding points one at a time across
// many series from several goroutines, with faults on the way, stores every point exactly once
// it is closed.
func TestWriterOnStores(t *testing.T) {
	for _, h := range itest.Stores {
		t.Run(h.Name(), func(t *testing.T) {
			t.Parallel()
			client, checker := azurite.NewTable(t, &azurite.TableOptions{
				Wrap: func(next policy.Transporter) policy.Transporter {
					return fault.New(next, fault.Options{Seed: 11, FailBefore: 0.05, LoseReply: 0.05})
				},
				Retry: &policy.RetryOptions{MaxRetries: 12, RetryDelay: time.Millisecond, MaxRetryDelay: 20 * time.Millisecond},
			})
			store := h.Make(t, client)
			var givenUp []tablets.Point
			var mu sync.Mutex
			w, err := writer.New(store, &writer.Options{
				FlushInterval: 20 * time.Millisecond,
				MaxBuffered:   2000,
				OnError: func(series string, points []tablets.Point, err error) {
					mu.Lock()
					defer mu.Unlock()
					givenUp = append(givenUp, points...)
				},
			})
			require.NoError(t, err)
			const series, perSeries = 100, 60
			start := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
			want := map[string][]tablets.Point{}
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 3))
					for i := range perSeries {
						for s := g; s < series; s += 4 {
							p := tablets.Point{Time: start.Add(time.Duration(i) * time.Second), Value: rng.Float64()}
							name := fmt.Sprintf("host-%03d", s)
							mu.Lock()
							want[name] = append(want[name], p)
							mu.Unlock()
							require.NoError(t, w.Add(name, p))
						}
					}
				}()
			}
			wg.Wait()
			require.NoError(t, w.Close(context.Background()))
			require.Empty(t, givenUp)
			require.EqualValues(t, series*perSeries, w.Stats().Written)
			require.Empty(t, checker.Violations())

			names := make([]string, 0, series)
			for name := range want {
				names = append(names, name)
			}
			got := map[string][]tablets.Point{}
			for sp, err := range store.QueryMany(context.Background(), names, start, start.Add(time.Hour)) {
				require.NoError(t, err)
				got[sp.Series] = append(got[sp.Series], sp.Point)
			}
			for name, points := range want {
				require.Len(t, got[name], len(points), name)
				for i, p := range points {
					require.True(t, p.Time.Equal(got[name][i].Time), name)
					require.Equal(t, p.Value, got[name][i].Value, name)
				}
			}
		})
	}
}
