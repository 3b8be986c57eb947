package filter

import (
	"cmp"
	"slices"
	"unicode/utf8"
)

// Eval reports whether an entity with the given string properties satisfies e. A comparison
// of a property the entity lacks is false (whatever the operator, as in Azure); the empty
// Expr is true. Strings are compared as by [CompareUTF16].
func (e Expr) Eval(props map[string]string) bool {
	return e.EvalFunc(func(prop string) (string, bool) {
		v, ok := props[prop]
		return v, ok
	})
}

// EvalFunc is Eval of an entity whose property prop is prop(prop) (false: the entity lacks
// it): a caller that keeps its properties as fields evaluates e without a map of them.
func (e Expr) EvalFunc(prop func(string) (string, bool)) bool {
	n := e.n
	if n == nil {
		return true
	}
	switch n.kind {
	case kindAnd:
		for _, x := range n.kids {
			if !x.EvalFunc(prop) {
				return false
			}
		}
		return true
	case kindOr:
		for _, x := range n.kids {
			if x.EvalFunc(prop) {
				return true
			}
		}
		return false
	}
	v, ok := prop(n.prop)
	if !ok {
		return false
	}
	c := CompareUTF16(v, n.val)
	switch n.op {
	case OpEq:
		return c == 0
	case OpNe:
		return c != 0
	case OpGt:
		return c > 0
	case OpGe:
		return c >= 0
	case OpLt:
		return c < 0
	default: // OpLe
		return c <= 0
	}
}

// CompareUTF16 compares a and b ordinally by their UTF-16 code units, as Azure (.NET
// ordinal comparison) and Azurite (JavaScript) compare keys, and returns -1, 0 or +1.
//
// This is Go's byte order (code point order) except that a character above U+FFFF (a
// surrogate pair in UTF-16) sorts before the characters U+E000 to U+FFFF. Where either
// string is invalid UTF-8 at the first difference, the bytes are compared.
func CompareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	// Back up to the start of the character holding the first difference; the bytes before
	// i are common to a and b.
	j := i
	for j > 0 && i-j < utf8.UTFMax-1 && !(utf8.RuneStart(a[j]) && utf8.RuneStart(b[j])) {
		j--
	}
	ra, sa := utf8.DecodeRuneInString(a[j:])
	rb, sb := utf8.DecodeRuneInString(b[j:])
	if ra == utf8.RuneError && sa <= 1 || rb == utf8.RuneError && sb <= 1 || j+sa <= i || j+sb <= i {
		return cmp.Compare(a[i], b[i])
	}
	// Both valid and different. Only a supplementary character (high surrogate D800-DBFF
	// first) against a BMP one differs from code point order.
	if (ra > 0xFFFF) != (rb > 0xFFFF) {
		if ra > 0xFFFF {
			ra = 0xD800 + (ra-0x10000)>>10
		} else {
			rb = 0xD800 + (rb-0x10000)>>10
		}
	}
	return cmp.Compare(ra, rb)
}

// LowerBound returns a value that property prop is at or above (by [CompareUTF16]) in every
// entity e selects, and true; false when e bounds prop from no side below (an empty e
// selects every entity). A comparison prop ge, gt or eq v bounds it by v; a conjunction
// by its greatest operand's bound; a disjunction by its least, when each operand bounds
// it. An entity that lacks prop fails every comparison of it, so that it is never
// selected where prop is bounded: a caller that keeps entities in the order of prop
// evaluates e only on those from the bound on.
func (e Expr) LowerBound(prop string) (string, bool) {
	n := e.n
	if n == nil {
		return "", false
	}
	switch n.kind {
	case kindAnd:
		bound, found := "", false
		for _, x := range n.kids {
			if b, ok := x.LowerBound(prop); ok && (!found || CompareUTF16(b, bound) > 0) {
				bound, found = b, true
			}
		}
		return bound, found
	case kindOr:
		var bound string
		for i, x := range n.kids {
			b, ok := x.LowerBound(prop)
			if !ok {
				return "", false
			}
			if i == 0 || CompareUTF16(b, bound) < 0 {
				bound = b
			}
		}
		return bound, true
	}
	if n.prop == prop && (n.op == OpGe || n.op == OpGt || n.op == OpEq) {
		return n.val, true
	}
	return "", false
}

// UpperBound is LowerBound's mirror: the greatest value of prop e allows (an entity e
// selects has prop at or below it), and whether e bounds it: a comparison prop le, lt or
// eq v by v; a conjunction by its least operand's bound; a disjunction by its greatest,
// when each operand bounds it.
func (e Expr) UpperBound(prop string) (string, bool) {
	n := e.n
	if n == nil {
		return "", false
	}
	switch n.kind {
	case kindAnd:
		bound, found := "", false
		for _, x := range n.kids {
			if b, ok := x.UpperBound(prop); ok && (!found || CompareUTF16(b, bound) < 0) {
				bound, found = b, true
			}
		}
		return bound, found
	case kindOr:
		var bound string
		for i, x := range n.kids {
			b, ok := x.UpperBound(prop)
			if !ok {
				return "", false
			}
			if i == 0 || CompareUTF16(b, bound) > 0 {
				bound = b
			}
		}
		return bound, true
	}
	if n.prop == prop && (n.op == OpLe || n.op == OpLt || n.op == OpEq) {
		return n.val, true
	}
	return "", false
}

// Disjuncts are filters whose disjunction selects what e does, each bounded on its own: a
// disjunction's operands; of a conjunction with one disjunction among its operands, that
// disjunction's operands each in conjunction with the others (distributed); else e alone.
// A caller that keeps entities in the order of a property evaluates e from each
// disjunct's bound (LowerBound), rather than from the least of them.
func (e Expr) Disjuncts() []Expr {
	n := e.n
	if n == nil {
		return []Expr{e}
	}
	switch n.kind {
	case kindOr:
		return n.kids
	case kindAnd:
		or := -1
		for i, x := range n.kids {
			if x.n.kind == kindOr {
				if or >= 0 {
					return []Expr{e} // two: left whole
				}
				or = i
			}
		}
		if or < 0 {
			return []Expr{e}
		}
		var out []Expr
		for _, d := range n.kids[or].n.kids {
			kids := append(slices.Clone(n.kids[:or]), d)
			out = append(out, And(append(kids, n.kids[or+1:]...)...))
		}
		return out
	}
	return []Expr{e}
}
