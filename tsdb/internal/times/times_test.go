package times

import (
	"testing"
	"time"
)

func TestTimes(t *testing.T) {
	if got := FloorSec(3725, time.Hour); got != 3600 {
		t.Errorf("FloorSec(3725, 1h) = %d", got)
	}
	if got := FloorSec(7200, time.Hour); got != 7200 {
		t.Errorf("FloorSec(7200, 1h) = %d", got)
	}
	at := time.Date(2024, 5, 23, 1, 2, 3, 0, time.UTC)
	if got := At(Unix(at)); !got.Equal(at) || got.Location() != time.UTC {
		t.Errorf("At(Unix(%v)) = %v", at, got)
	}
	a, b := at, at.Add(time.Second)
	if Later(a, b) != b || Later(b, a) != b || Earlier(a, b) != a || Earlier(b, a) != a {
		t.Error("Later/Earlier picked the wrong one")
	}
}
