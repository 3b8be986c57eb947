package filter

import (
	"fmt"
	"strings"
	"unsafe"
)

// Quote returns s as an OData string literal: s wrapped in single quotes, with each single
// quote inside it doubled. It is the only escaping a value needs inside a filter; URL
// encoding of the whole filter is the HTTP client's job. For example Quote("O'Brien") is
//
//	'O''Brien'
func Quote(s string) string {
	b := appendQuoted(make([]byte, 0, len(s)+2+strings.Count(s, "'")), s)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func appendQuoted(b []byte, s string) []byte {
	b = append(b, '\'')
	for {
		i := strings.IndexByte(s, '\'')
		if i < 0 {
			break
		}
		b = append(b, s[:i+1]...)
		b = append(b, '\'')
		s = s[i+1:]
	}
	b = append(b, s...)
	return append(b, '\'')
}

// Op is a comparison operator.
type Op string

// The comparison operators of OData.
const (
	OpEq Op = "eq" // equal
	OpNe Op = "ne" // not equal
	OpGt Op = "gt" // greater than
	OpGe Op = "ge" // greater than or equal
	OpLt Op = "lt" // less than
	OpLe Op = "le" // less than or equal
)

func (op Op) valid() bool {
	switch op {
	case OpEq, OpNe, OpGt, OpGe, OpLt, OpLe:
		return true
	}
	return false
}

// ValidProperty reports whether name can be used as a property name in a filter: 1 to 255
// ASCII letters, digits and underscores, not starting with a digit, and not an OData keyword
// (and, or, not, eq, ne, gt, ge, lt, le, true, false, null). Azure also allows non-ASCII
// letters; this package does not.
func ValidProperty(name string) bool {
	if len(name) == 0 || len(name) > 255 || isDigit(name[0]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isIdent(name[i]) {
			return false
		}
	}
	switch name {
	case "and", "or", "not", "eq", "ne", "gt", "ge", "lt", "le", "true", "false", "null":
		return false
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isIdent(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '_'
}

// Expr is an immutable filter expression: a comparison, or an and/or of expressions.
//
// The zero Expr is the empty filter, which selects every entity: its String is "", it has
// no comparisons and Eval returns true. And drops empty operands; Or with an empty operand
// is empty. Pack refuses empty clauses.
type Expr struct{ n *node }

type kind uint8

const (
	kindCmp kind = iota + 1
	kindAnd
	kindOr
)

type node struct {
	kind kind
	op   Op     // kindCmp
	prop string // kindCmp
	val  string // kindCmp, unquoted
	kids []Expr // kindAnd, kindOr: at least 2, none of the same kind, none empty
	ncmp int    // comparisons
	tlen int    // len(String())
	elen int    // len(url.QueryEscape(String()))
}

// Compare returns the comparison "property op value". value is an arbitrary string, written
// as a string literal by [Quote], so no value can change the structure of a filter.
//
// Compare panics if property is not a [ValidProperty] or op is not one of the six operators:
// property names and operators are constants of the calling code, and a bad one is a
// programming error. It never panics because of value.
func Compare(property string, op Op, value string) Expr {
	if !ValidProperty(property) {
		panic(fmt.Sprintf("filter: invalid property name %q", property))
	}
	if !op.valid() {
		panic(fmt.Sprintf("filter: invalid operator %q", string(op)))
	}
	return newCmp(property, op, value)
}

func newCmp(property string, op Op, value string) Expr {
	q := strings.Count(value, "'")
	// property SP op SP 'value' ; in the query encoding SP is "+", ' is "%27", and the
	// property and operator are unreserved characters.
	fixed := len(property) + 1 + len(op) + 1
	return Expr{&node{
		kind: kindCmp, op: op, prop: property, val: value, ncmp: 1,
		tlen: fixed + 2 + len(value) + q,
		elen: fixed + 6 + encodedLen(value) + 3*q,
	}}
}

// Eq returns Compare(property, OpEq, value).
func Eq(property, value string) Expr { return Compare(property, OpEq, value) }

// Ne returns Compare(property, OpNe, value).
func Ne(property, value string) Expr { return Compare(property, OpNe, value) }

// Gt returns Compare(property, OpGt, value).
func Gt(property, value string) Expr { return Compare(property, OpGt, value) }

// Ge returns Compare(property, OpGe, value).
func Ge(property, value string) Expr { return Compare(property, OpGe, value) }

// Lt returns Compare(property, OpLt, value).
func Lt(property, value string) Expr { return Compare(property, OpLt, value) }

// Le returns Compare(property, OpLe, value).
func Le(property, value string) Expr { return Compare(property, OpLe, value) }

// never selects nothing: no string is less than the empty string, and every entity has a
// PartitionKey.
var never = newCmp("PartitionKey", OpLt, "")

// And returns the conjunction of e. Operands that are themselves conjunctions are flattened
// into the result and empty operands are dropped; And of a single operand is that operand,
// and And() is the empty Expr, which selects everything.
func And(e ...Expr) Expr { return join(kindAnd, e) }

// Or returns the disjunction of e. Operands that are themselves disjunctions are flattened
// into the result, and Or of a single operand is that operand. An empty operand makes the
// result empty (it selects everything). Or() selects nothing, and is the single comparison
// below (no key is less than the empty string), so that it can never be mistaken for an
// empty filter:
//
//	PartitionKey lt ''
func Or(e ...Expr) Expr { return join(kindOr, e) }

// Length of " and " / " or ", the same in the text and in its query encoding ("+and+").
func sepLen(k kind) int {
	if k == kindAnd {
		return 5
	}
	return 4
}

func join(k kind, es []Expr) Expr {
	n := 0
	var last Expr
	for _, x := range es {
		switch {
		case x.n == nil:
			if k == kindOr {
				return Expr{}
			}
		case x.n.kind == k:
			n += len(x.n.kids)
		default:
			n++
			last = x
		}
	}
	switch n {
	case 0:
		if k == kindAnd {
			return Expr{}
		}
		return never
	case 1:
		return last // a node of kind k has at least 2 kids, so the single operand is last
	}
	r := &node{kind: k, kids: make([]Expr, 0, n)}
	for _, x := range es {
		switch {
		case x.n == nil:
		case x.n.kind == k:
			r.kids = append(r.kids, x.n.kids...)
		default:
			r.kids = append(r.kids, x)
		}
	}
	sep := sepLen(k)
	r.tlen, r.elen = sep*(n-1), sep*(n-1)
	for _, x := range r.kids {
		r.ncmp += x.n.ncmp
		r.tlen += x.n.tlen
		r.elen += x.n.elen
		if x.n.kind != kindCmp {
			r.tlen += 2 // ( )
			r.elen += 6 // %28 %29
		}
	}
	return Expr{r}
}

// IsZero reports whether e is the empty Expr.
func (e Expr) IsZero() bool { return e.n == nil }

// Comparisons returns the number of discrete comparisons in e, the figure Azure limits to
// 15 per filter.
func (e Expr) Comparisons() int {
	if e.n == nil {
		return 0
	}
	return e.n.ncmp
}

// Len returns len(e.String()) without building the string.
func (e Expr) Len() int {
	if e.n == nil {
		return 0
	}
	return e.n.tlen
}

// EncodedLen returns len(url.QueryEscape(e.String())), the length the filter takes in the
// request URL, without building the string.
func (e Expr) EncodedLen() int {
	if e.n == nil {
		return 0
	}
	return e.n.elen
}

// String returns e as OData text: comparisons are written "Property op 'value'", and every
// operand of and/or that is not a comparison is parenthesized, so the text reads the same
// whatever the precedence of and and or. The empty Expr gives "".
func (e Expr) String() string {
	if e.n == nil {
		return ""
	}
	b := e.AppendTo(make([]byte, 0, e.n.tlen))
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// AppendTo appends e.String() to b and returns the extended slice.
func (e Expr) AppendTo(b []byte) []byte {
	n := e.n
	if n == nil {
		return b
	}
	if n.kind == kindCmp {
		b = append(b, n.prop...)
		b = append(b, ' ')
		b = append(b, n.op...)
		b = append(b, ' ')
		return appendQuoted(b, n.val)
	}
	sep := " and "
	if n.kind == kindOr {
		sep = " or "
	}
	for i, x := range n.kids {
		if i > 0 {
			b = append(b, sep...)
		}
		if x.n.kind == kindCmp {
			b = x.AppendTo(b)
		} else {
			b = append(b, '(')
			b = x.AppendTo(b)
			b = append(b, ')')
		}
	}
	return b
}

// encodedLen returns len(url.QueryEscape(s)): unreserved bytes and the space (written "+")
// take one byte, every other byte three (%XX).
func encodedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if !encodesAsOne[s[i]] {
			n += 2
		}
	}
	return n
}

var encodesAsOne = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = isIdent(byte(c)) || c == '-' || c == '.' || c == '~' || c == ' '
	}
	return t
}()
