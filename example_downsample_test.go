package tablets_test

import (
	"fmt"
	"time"

	"github.com/seed71701133/tablets"
)

func ExampleDownsample() {
	start := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	var points []tablets.Point
	// Ten CPU readings, one every 20 seconds from 12:00:00 to 12:03:00.
	for i, v := range []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100} {
		points = append(points, tablets.Point{Time: start.Add(time.Duration(i) * 20 * time.Second), Value: v})
	}
	// In real code the input is a store's Query; here it is the slice.
	input := func(yield func(tablets.Point, error) bool) {
		for _, p := range points {
			if !yield(p, nil) {
				return
			}
		}
	}

	for _, agg := range []tablets.Aggregation{tablets.Avg, tablets.P90} {
		fmt.Println(agg)
		for p, err := range tablets.Downsample(input, time.Minute, agg) {
			if err != nil {
				fmt.Println("error:", err)
				return
			}
			fmt.Printf("  %s %g\n", p.Time.Format("15:04"), p.Value)
		}
	}
	// Output:
	// avg
	//   12:00 20
	//   12:01 50
	//   12:02 80
	//   12:03 100
	// p90
	//   12:00 28
	//   12:01 58
	//   12:02 88
	//   12:03 100
}
