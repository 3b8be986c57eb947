package rounding_test

import (
	"fmt"
	"time"

	"github.com/seed71701133/tablets/rounding"
)

func ExampleKeyFormat() {
	at := time.Date(2015, 4, 28, 12, 4, 35, 0, time.UTC)
	format, _ := rounding.NewKeyFormat(time.Second)
	key, _ := format.Format(rounding.Floor(at, 4*time.Minute))
	fmt.Println(key, format.Width)
	back, _ := format.Parse(key)
	fmt.Println(back)
	// Output:
	// 001430222640 12
	// 2015-04-28 12:04:00 +0000 UTC
}
