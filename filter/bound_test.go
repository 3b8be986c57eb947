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

func TestUpperBoundAndDisjuncts(t *testing.T) {
	for _, c := range []struct {
		e     Expr
		bound string
		ok    bool
	}{
		{Expr{}, "", false},
		{Le("T", "5"), "5", true},
		{Lt("T", "5"), "5", true},
		{Eq("T", "5"), "5", true},
		{Gt("T", "5"), "", false},
		{And(Lt("T", "9"), Lt("T", "3"), Ge("U", "1")), "3", true},
		{Or(And(Lt("T", "9"), Ge("U", "3")), And(Lt("T", "h9"), Ge("U", "h3"))), "h9", true},
		{Or(Lt("T", "3"), Ge("U", "1")), "", false},
	} {
		b, ok := c.e.UpperBound("T")
		if b != c.bound || ok != c.ok {
			t.Errorf("%s: UpperBound = %q, %v; want %q, %v", c.e, b, ok, c.bound, c.ok)
		}
	}
	floats, hists := And(Lt("T", "9"), Ge("U", "3")), And(Lt("T", "h9"), Ge("U", "h3"))
	for _, c := range []struct {
		e    Expr
		want []Expr
	}{
		{Ge("U", "1"), []Expr{Ge("U", "1")}},
		{Or(floats, hists), []Expr{floats, hists}},
		{And(Or(floats, hists), Le("A", "x")), []Expr{And(floats, Le("A", "x")), And(hists, Le("A", "x"))}},
	} {
		got := c.e.Disjuncts()
		if len(got) != len(c.want) {
			t.Fatalf("%s: Disjuncts = %v, want %v", c.e, got, c.want)
		}
		for i := range got {
			if got[i].String() != c.want[i].String() {
				t.Errorf("%s: Disjuncts[%d] = %s, want %s", c.e, i, got[i], c.want[i])
			}
		}
	}
	// Random filters over random entities: what one selects has T at or below its upper
	// bound, and its disjuncts together select what it does.
	rng := rand.New(rand.NewPCG(3, 4))
	vals := []string{"", "1", "3", "5", "h", "h2", "\uffff", "\U0001F600"}
	val := func() string { return vals[rng.IntN(len(vals))] }
	var gen func(depth int) Expr
	gen = func(depth int) Expr {
		if depth == 0 || rng.IntN(3) == 0 {
			ops := []Op{OpEq, OpNe, OpGt, OpGe, OpLt, OpLe}
			return Compare([]string{"T", "U", "A"}[rng.IntN(3)], ops[rng.IntN(len(ops))], val())
		}
		kids := []Expr{gen(depth - 1), gen(depth - 1), gen(depth - 1)}[:2+rng.IntN(2)]
		if rng.IntN(2) == 0 {
			return And(kids...)
		}
		return Or(kids...)
	}
	for range 5000 {
		e := gen(3)
		b, bounded := e.UpperBound("T")
		ds := e.Disjuncts()
		for range 20 {
			props := map[string]string{"U": val(), "A": val()}
			if rng.IntN(4) != 0 {
				props["T"] = val()
			}
			selected := e.Eval(props)
			if bounded && selected {
				if tv, has := props["T"]; !has || CompareUTF16(tv, b) > 0 {
					t.Fatalf("%s selects %v, above its bound %q", e, props, b)
				}
			}
			any := false
			for _, d := range ds {
				any = any || d.Eval(props)
			}
			if any != selected {
				t.Fatalf("%s: its disjuncts %v select %v: %v, it %v", e, ds, props, any, selected)
			}
		}
	}
}
