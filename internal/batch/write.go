package batch

import (
	"errors"
	"fmt"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/rounding"
)

// Units checks the points' times and returns them in format's units.
func Units(format rounding.KeyFormat, points []tablets.Point) ([]uint64, error) {
	units := make([]uint64, len(points))
	for i, p := range points {
		u, err := format.Units(p.Time)
		if err != nil {
			return nil, fmt.Errorf("point %d: %w", i, err)
		}
		units[i] = u
	}
	return units, nil
}

// LastWins returns the indexes of the arguments in time order, keeping only the last
// argument of each time: within one Write the later argument wins, and no entity or slot
// appears twice in a transaction.
func LastWins(units []uint64) []int {
	order := make([]int, len(units))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case units[a] < units[b]:
			return -1
		case units[a] > units[b]:
			return 1
		}
		return 0
	})
	kept := order[:0]
	for i, idx := range order {
		if i+1 < len(order) && units[order[i+1]] == units[idx] {
			continue // superseded by a later argument
		}
		kept = append(kept, idx)
	}
	return kept
}

// WriteError is the error of a Write whose transaction t failed with errs[t] (nil for
// success): nil if none failed, else a *tablets.WriteError listing every argument for which
// lost returns true, with the first failure's code and operation index.
func WriteError(series string, points []tablets.Point, errs []error, lost func(i int) bool) error {
	var first error
	for _, err := range errs {
		if err != nil {
			first = err
			break
		}
	}
	if first == nil {
		return nil
	}
	we := &tablets.WriteError{Series: series, Index: -1, Err: first}
	var be *Error
	var re *azcore.ResponseError
	switch {
	case errors.As(first, &be):
		we.Code, we.Index, we.Status = be.Code, be.Index, be.Status
	case errors.As(first, &re):
		we.Code, we.Status = re.ErrorCode, re.StatusCode
	}
	for i, p := range points {
		if lost(i) {
			we.Failed = append(we.Failed, p)
		}
	}
	return we
}
