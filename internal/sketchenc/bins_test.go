package sketchenc

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// A sketch rebuilt from its zero count and bins is the same sketch; FromBins rejects what
// no sketch holds.
func TestFromBins(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	s := New(0.01)
	for range 1000 {
		s.Add(rng.NormFloat64() * 100)
	}
	s.Add(0)
	s.Add(math.Inf(1))
	s.Add(math.Inf(-1))
	got, err := FromBins(0.01, s.ZeroCount(), s.Bins(nil, false), s.Bins(nil, true))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Append(nil), s.Append(nil)) || got.Gamma() != s.Gamma() || Gamma(0.01) != s.Gamma() {
		t.Fatal("rebuilt sketch differs")
	}
	lo, hi := KeyRange(0.01)
	for name, bins := range map[string][]Bin{
		"not ascending": {{5, 1}, {5, 1}},
		"count 0":       {{5, 0}},
		"below range":   {{lo - 1, 1}},
		"above range":   {{hi + 1, 1}},
		"overflow":      {{1, math.MaxUint64}, {2, 1}},
	} {
		if _, err := FromBins(0.01, 0, nil, bins); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error %v", name, err)
		}
	}
	if _, err := FromBins(0.01, 0, []Bin{{lo, 1}, {hi, 2}}, nil); err != nil {
		t.Errorf("the range's ends: %v", err)
	}
	if _, err := FromBins(2, 0, nil, nil); err == nil {
		t.Error("accuracy 2 accepted")
	}
}
