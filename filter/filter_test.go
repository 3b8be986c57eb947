package filter

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQuote(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "sensor1", "'sensor1'"},
		{"quote", "O'Brien", "'O''Brien'"},
		{"empty", "", "''"},
		{"only a quote", "'", "''''"},
		{"unicode", "température/°C ☃ 😀", "'température/°C ☃ 😀'"},
		{"many quotes", "'a''b'''", "'''a''''b'''''''"},
		{"quote at ends", "'x'", "'''x'''"},
		{"odata syntax", "x' or RowKey ne '", "'x'' or RowKey ne '''"},
		{"invalid utf8", "a\xffb", "'a\xffb'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Quote(tt.in)
			require.Equal(t, tt.want, got)
			require.Equal(t, 2+len(tt.in)+strings.Count(tt.in, "'"), len(got))
		})
	}
}

func TestValidProperty(t *testing.T) {
	for _, name := range []string{"PartitionKey", "RowKey", "v12", "_x", "A", "a_1_B", strings.Repeat("p", 255)} {
		require.True(t, ValidProperty(name), name)
	}
	for _, name := range []string{"", "1a", "a b", "a-b", "é", "a'", "and", "or", "not", "eq", "le", "true", "null", strings.Repeat("p", 256)} {
		require.False(t, ValidProperty(name), name)
	}
}

func TestComparePanicsOnlyOnProgrammingErrors(t *testing.T) {
	require.PanicsWithValue(t, `filter: invalid property name "Row Key"`, func() { Eq("Row Key", "x") })
	require.PanicsWithValue(t, `filter: invalid operator "EQ"`, func() { Compare("RowKey", "EQ", "x") })
	require.NotPanics(t, func() { Eq("RowKey", "x' or 1 eq 1 or '\x00\xff") })
}

func TestString(t *testing.T) {
	pk, rk := "PartitionKey", "RowKey"
	tests := []struct {
		name string
		e    Expr
		want string
		cmps int
	}{
		{"empty", Expr{}, "", 0},
		{"eq", Eq(pk, "a"), "PartitionKey eq 'a'", 1},
		{"every op", And(Eq("p", "1"), Ne("p", "2"), Gt("p", "3"), Ge("p", "4"), Lt("p", "5"), Le("p", "6")),
			"p eq '1' and p ne '2' and p gt '3' and p ge '4' and p lt '5' and p le '6'", 6},
		{"quote", Eq(pk, "O'Brien"), "PartitionKey eq 'O''Brien'", 1},
		{"range", And(Eq(pk, "s'1"), Ge(rk, "0001"), Lt(rk, "0002")),
			"PartitionKey eq 's''1' and RowKey ge '0001' and RowKey lt '0002'", 3},
		{"or of ranges", Or(And(Eq(pk, "a"), Ge(rk, "1")), And(Eq(pk, "b"), Lt(rk, "2"))),
			"(PartitionKey eq 'a' and RowKey ge '1') or (PartitionKey eq 'b' and RowKey lt '2')", 4},
		{"and of ors", And(Or(Eq(pk, "a"), Eq(pk, "b")), Or(Eq(rk, "1"), Eq(rk, "2")), Eq("x", "y")),
			"(PartitionKey eq 'a' or PartitionKey eq 'b') and (RowKey eq '1' or RowKey eq '2') and x eq 'y'", 5},
		{"or of comparisons", Or(Eq(pk, "a"), Eq(pk, "b"), Eq(pk, "c")),
			"PartitionKey eq 'a' or PartitionKey eq 'b' or PartitionKey eq 'c'", 3},
		{"nested and flattened", And(And(Eq("a", "1"), Eq("b", "2")), And(Eq("c", "3"), And(Eq("d", "4")))),
			"a eq '1' and b eq '2' and c eq '3' and d eq '4'", 4},
		{"nested or flattened", Or(Eq("a", "1"), Or(Eq("b", "2"), And(Eq("c", "3"), Eq("d", "4")))),
			"a eq '1' or b eq '2' or (c eq '3' and d eq '4')", 4},
		{"deep", And(Eq("a", "1"), Or(Eq("b", "2"), And(Eq("c", "3"), Or(Eq("d", "4"), Eq("e", "5"))))),
			"a eq '1' and (b eq '2' or (c eq '3' and (d eq '4' or e eq '5')))", 5},
		{"single operand", And(Or(Eq("a", "1"))), "a eq '1'", 1},
		{"and drops empty", And(Expr{}, Eq("a", "1"), Expr{}), "a eq '1'", 1},
		{"and of nothing", And(), "", 0},
		{"or with empty is empty", Or(Eq("a", "1"), Expr{}), "", 0},
		{"or of nothing selects nothing", Or(), "PartitionKey lt ''", 1},
		{"and with or of nothing", And(Eq("a", "1"), Or()), "a eq '1' and PartitionKey lt ''", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.e.String()
			require.Equal(t, tt.want, s)
			require.Equal(t, tt.cmps, tt.e.Comparisons())
			require.Equal(t, len(s), tt.e.Len())
			require.Equal(t, len(url.QueryEscape(s)), tt.e.EncodedLen())
			require.Equal(t, "x"+s, string(tt.e.AppendTo([]byte("x"))))
			require.Equal(t, tt.want == "", tt.e.IsZero())
			back, err := Parse(s)
			require.NoError(t, err)
			require.Equal(t, tt.e, back)
		})
	}
}

func TestImmutable(t *testing.T) {
	ops := []Expr{Eq("a", "1"), Eq("b", "2")}
	e := And(ops...)
	ops[0] = Eq("z", "9")
	require.Equal(t, "a eq '1' and b eq '2'", e.String())
}

func TestEncodedLen(t *testing.T) {
	for _, s := range []string{"", "abc", "a b", "'", "-_.~", "!*()$&+,/:;=?@#%[]\"<>\\^`{|}", "é😀\x00\x7f\xff", "PartitionKey eq 'x'"} {
		require.Equal(t, len(url.QueryEscape(s)), encodedLen(s), "%q", s)
		e := Eq("RowKey", s)
		require.Equal(t, len(url.QueryEscape(e.String())), e.EncodedLen(), "%q", s)
	}
}

func TestCompareUTF16(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "a", -1},
		{"a", "", 1},
		{"a", "b", -1},
		{"ab", "a", 1},
		{"a'", "a''", -1},
		{"é", "z", 1},
		{"\uE000", "\U0001F600", 1}, // U+E000 > D83D: reversed from byte order
		{"\uFFFD", "\U0001F600", 1},
		{"\uFFFF", "\U00010000", 1},
		{"\uD7FF", "\U00010000", -1}, // below the surrogates: as byte order
		{"\U0001F600", "\U0001F601", -1},
		{"\U0001F600", "\U00100000", -1},
		{"x\U0001F600y", "x\uFFFDy", -1},
		{"é", "è", 1},    // same first byte
		{"\xff", "a", 1}, // invalid: bytes
		{"a\xffb", "a\xfeb", 1},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, CompareUTF16(tt.a, tt.b), "%q %q", tt.a, tt.b)
		require.Equal(t, -tt.want, CompareUTF16(tt.b, tt.a), "%q %q", tt.b, tt.a)
	}
}

// utf16Compare is the reference: compare the UTF-16 encodings.
func utf16Compare(a, b string) int {
	ua, ub := []rune(a), []rune(b) // valid strings only
	var ea, eb []uint16
	for _, r := range ua {
		ea = appendUTF16(ea, r)
	}
	for _, r := range ub {
		eb = appendUTF16(eb, r)
	}
	for i := 0; i < len(ea) && i < len(eb); i++ {
		if ea[i] != eb[i] {
			if ea[i] < eb[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(ea) < len(eb):
		return -1
	case len(ea) > len(eb):
		return 1
	}
	return 0
}

func appendUTF16(s []uint16, r rune) []uint16 {
	if r < 0x10000 {
		return append(s, uint16(r))
	}
	r -= 0x10000
	return append(s, uint16(0xD800+r>>10), uint16(0xDC00+r&0x3FF))
}

func TestCompareUTF16MatchesReference(t *testing.T) {
	pieces := []string{"", "a", "é", "\u07FF", "\u0800", "\uD7FF", "\uE000", "\uFFFD", "\uFFFF", "\U00010000", "\U0001F600", "\U0010FFFF"}
	for _, a1 := range pieces {
		for _, a2 := range pieces {
			for _, b1 := range pieces {
				for _, b2 := range pieces {
					a, b := "x"+a1+a2, "x"+b1+b2
					require.Equal(t, utf16Compare(a, b), CompareUTF16(a, b), "%q %q", a, b)
				}
			}
		}
	}
}

func TestEval(t *testing.T) {
	ent := map[string]string{"PartitionKey": "O'Brien", "RowKey": "0005"}
	tests := []struct {
		e    Expr
		want bool
	}{
		{Expr{}, true},
		{Eq("PartitionKey", "O'Brien"), true},
		{Eq("PartitionKey", "O''Brien"), false},
		{Ne("PartitionKey", "x"), true},
		{Gt("RowKey", "0004"), true},
		{Gt("RowKey", "0005"), false},
		{Ge("RowKey", "0005"), true},
		{Lt("RowKey", "0005"), false},
		{Lt("RowKey", "0006"), true},
		{Le("RowKey", "0005"), true},
		{Le("RowKey", "00049"), false},
		{Eq("Missing", "x"), false},
		{Ne("Missing", "x"), false}, // a missing property compares false, whatever the operator
		{And(Eq("PartitionKey", "O'Brien"), Ge("RowKey", "0001"), Lt("RowKey", "0009")), true},
		{And(Eq("PartitionKey", "O'Brien"), Ge("RowKey", "0006")), false},
		{Or(Eq("PartitionKey", "x"), Eq("RowKey", "0005")), true},
		{Or(Eq("PartitionKey", "x"), Eq("RowKey", "0006")), false},
		{Or(), false},
	}
	// EvalFunc of the same entity, its properties given by a func, as Eval of the map.
	asked := map[string]bool{}
	prop := func(name string) (string, bool) {
		asked[name] = true
		v, ok := ent[name]
		return v, ok
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.e.Eval(ent), tt.e.String())
		require.Equal(t, tt.want, tt.e.EvalFunc(prop), "EvalFunc: "+tt.e.String())
	}
	require.True(t, asked["Missing"], "EvalFunc asks for a property the entity lacks")
}
