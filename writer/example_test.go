package writer_test

import (
	"context"
	"fmt"
	"log"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/writer"
)

// exampleWriterStore keeps points in memory. A Writer only calls Write, so this is a
// writer.Sink; in real code the sink is a store such as basic.New(client, nil).
type exampleWriterStore struct {
	mu     sync.Mutex
	points map[string]map[time.Time]float64
}

func (s *exampleWriterStore) Write(_ context.Context, series string, points ...tablets.Point) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.points[series] == nil {
		s.points[series] = map[time.Time]float64{}
	}
	for _, p := range points {
		s.points[series][p.Time] = p.Value // the later argument wins
	}
	return nil
}

func Example() {
	store := &exampleWriterStore{points: map[string]map[time.Time]float64{}}
	w, err := writer.New(store, &writer.Options{
		FlushInterval: 5 * time.Second,
		OnError: func(series string, points []tablets.Point, err error) {
			log.Printf("lost %d points of %s: %v", len(points), series, err)
		},
	})
	if err != nil {
		fmt.Println("new:", err)
		return
	}

	// A collector adds readings one at a time, across series, from any goroutine.
	start := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 3 {
		for h, host := range []string{"web-1", "web-2"} {
			p := tablets.Point{Time: start.Add(time.Duration(i) * 10 * time.Second), Value: float64(10*h + i)}
			if err := w.Add("cpu."+host, p); err != nil {
				fmt.Println("add:", err)
				return
			}
		}
	}
	// A later point of the same series and time replaces the earlier one.
	if err := w.Add("cpu.web-1", tablets.Point{Time: start, Value: 99}); err != nil {
		fmt.Println("add:", err)
		return
	}

	// Close writes whatever is still buffered and stops the writer.
	if err := w.Close(context.Background()); err != nil {
		fmt.Println("close:", err)
		return
	}
	s := w.Stats()
	fmt.Printf("added %d, written %d, given up %d\n", s.Added, s.Written, s.GivenUp)
	for _, series := range slices.Sorted(maps.Keys(store.points)) {
		for _, t := range slices.SortedFunc(maps.Keys(store.points[series]), time.Time.Compare) {
			fmt.Printf("%s %s %g\n", series, t.Format("15:04:05"), store.points[series][t])
		}
	}
	// Output:
	// added 7, written 7, given up 0
	// cpu.web-1 12:00:00 99
	// cpu.web-1 12:00:10 1
	// cpu.web-1 12:00:20 2
	// cpu.web-2 12:00:00 10
	// cpu.web-2 12:00:10 11
	// cpu.web-2 12:00:20 12
}
