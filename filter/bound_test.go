package filter

import (
	"math/rand/v2"
	"testing"
)

// LowerBound's bound holds in every entity the filter selects, and is the comparisons'.
func TestLowerBound(t *testing.T) {
	for _, c := range []struct {
		e     Expr
		bound string
		ok    bool
	}{
		{Expr{}, "", false},
		{Ge("U", "5"), "5", true},
		{Gt("U", "5"), "5", true},
		{Eq("U", "5"), "5", true},
		{Lt("U", "5"), "", false},
		{Ge("T", "5"), "", false},
		{And(Lt("T", "9"), Ge("U", "3")), "3", true},
		{And(Ge("U", "3"), Ge("U", "7")), "7", true},
		{Or(And(Lt("T", "9"), Ge("U", "3")), And(Lt("T", "h9"), Ge("U", "h3"))), "3", true},
		{Or(Ge("U", "3"), Lt("T", "1")), "", false},
		{And(Or(Ge("U", "3"), Ge("U", "2")), Le("A", "x")), "2", true},
	} {
		b, ok := c.e.LowerBound("U")
		if b != c.bound || ok != c.ok {
			t.Errorf("%s: LowerBound = %q, %v; want %q, %v", c.e, b, ok, c.bound, c.ok)
		}
	}
	// Random filters of T and U over random entities: what one selects has U at or above
	// its bound.
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []string{"", "1", "3", "5", "h", "h2", "\uffff", "\U0001F600"}
	val := func() string { return vals[rng.IntN(len(vals))] }
	var gen func(depth int) Expr
	gen = func(depth int) Expr {
		if depth == 0 || rng.IntN(3) == 0 {
			ops := []Op{OpEq, OpNe, OpGt, OpGe, OpLt, OpLe}
			return Compare([]string{"T", "U"}[rng.IntN(2)], ops[rng.IntN(len(ops))], val())
		}
		kids := []Expr{gen(depth - 1), gen(depth - 1)}
		if rng.IntN(2) == 0 {
			return And(kids...)
		}
		return Or(kids...)
	}
	for range 5000 {
		e := gen(3)
		b, ok := e.LowerBound("U")
		if !ok {
			continue
		}
		for range 20 {
			props := map[string]string{"T": val()}
			if rng.IntN(4) != 0 {
				props["U"] = val()
			}
			if !e.Eval(props) {
				continue
			}
			if u, has := props["U"]; !has || CompareUTF16(u, b) < 0 {
				t.Fatalf("%s selects %v, below its bound %q", e, props, b)
			}
		}
	}
}
