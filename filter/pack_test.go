package filter

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkPack packs clauses and checks all that Pack promises: each filter obeys both limits
// (measured with url.QueryEscape and by parsing the text back), the filters are contiguous
// runs of the clauses in order, each run is as long as the limits allow (greedy, hence the
// fewest filters), and the OR of the filters, parsed back from their text, selects exactly
// the entities Or(clauses...) selects.
func checkPack(t testing.TB, clauses []Expr, lim Limits, entities []map[string]string) []Expr {
	t.Helper()
	packed, err := Pack(clauses, lim)
	require.NoError(t, err)
	maxC, maxL := lim.MaxComparisons, lim.MaxLength
	if maxC == 0 {
		maxC = MaxComparisons
	}
	if maxL == 0 {
		maxL = DefaultMaxLength
	}
	parsed := make([]Expr, len(packed))
	a := 0 // the run of packed[i] is clauses[a:b]
	for i, f := range packed {
		s := f.String()
		require.LessOrEqual(t, len(url.QueryEscape(s)), maxL, s)
		require.Equal(t, len(url.QueryEscape(s)), f.EncodedLen(), s)
		g, err := Parse(s)
		require.NoError(t, err, s)
		require.Equal(t, f, g, s)
		require.LessOrEqual(t, g.Comparisons(), maxC, s)
		parsed[i] = g

		b := a + 1
		for b <= len(clauses) && Or(clauses[a:b]...).String() != s {
			b++
		}
		require.LessOrEqual(t, b, len(clauses), "filter %d is not the next run of clauses", i)
		if b < len(clauses) {
			more := Or(clauses[a : b+1]...)
			require.True(t, more.Comparisons() > maxC || more.EncodedLen() > maxL, "filter %d could hold one more clause", i)
		}
		a = b
	}
	require.Equal(t, len(clauses), a, "the filters do not cover every clause")

	want := Or(clauses...)
	for _, ent := range entities {
		got := false
		for _, g := range parsed {
			got = got || g.Eval(ent)
		}
		require.Equal(t, want.Eval(ent), got, "entity %q", ent)
	}
	return packed
}

// cmps returns n single-comparison clauses.
func cmps(n int) []Expr {
	out := make([]Expr, n)
	for i := range out {
		out[i] = Eq("PartitionKey", fmt.Sprint("s", i))
	}
	return out
}

// ranges returns n 3-comparison range clauses.
func ranges(n int) []Expr {
	out := make([]Expr, n)
	for i := range out {
		out[i] = And(Eq("PartitionKey", fmt.Sprint("s'", i)), Ge("RowKey", "0001"), Lt("RowKey", "0009"))
	}
	return out
}

func counts(fs []Expr) []int {
	out := make([]int, len(fs))
	for i, f := range fs {
		out[i] = f.Comparisons()
	}
	return out
}

func TestPack(t *testing.T) {
	two := And(Eq("PartitionKey", "p"), Eq("RowKey", "r"))
	three := ranges(1)[0]
	long := func(n int) Expr { return Eq("PartitionKey", strings.Repeat("x", n)) }
	// Encoded length of long(n): "PartitionKey+eq+%27" + n + "%27".
	longLen := len("PartitionKey+eq+%27%27")
	tests := []struct {
		name    string
		clauses []Expr
		limits  Limits
		want    []int // comparisons per filter
	}{
		{"nil", nil, Limits{}, []int{}},
		{"empty", []Expr{}, Limits{}, []int{}},
		{"one", cmps(1), Limits{}, []int{1}},
		{"exactly 15", cmps(15), Limits{}, []int{15}},
		{"16", cmps(16), Limits{}, []int{15, 1}},
		{"31", cmps(31), Limits{}, []int{15, 15, 1}},
		{"3-comparison clauses not split", ranges(11), Limits{}, []int{15, 15, 3}},
		{"3-comparison clauses, limit 14", ranges(11), Limits{MaxComparisons: 14}, []int{12, 12, 9}},
		{"2-comparison clauses", []Expr{two, two, two, two, two, two, two, two}, Limits{}, []int{14, 2}},
		{"mixed", []Expr{three, three, three, three, two, two}, Limits{}, []int{14, 2}},
		{"one clause holding 15", []Expr{And(cmps(15)...), Eq("a", "b")}, Limits{}, []int{15, 1}},
		{"or clauses flattened", []Expr{Or(cmps(10)...), Or(cmps(10)...)}, Limits{}, []int{10, 10}},
		{"custom count limit", cmps(10), Limits{MaxComparisons: 4}, []int{4, 4, 2}},
		{"length binds before count", []Expr{long(1000), long(1000), long(1000), long(1000), long(1000)},
			Limits{}, []int{3, 2}},
		{"length exactly two", []Expr{long(100), long(100), long(100)},
			Limits{MaxLength: 2*(longLen+100) + 4}, []int{2, 1}},
		{"length one short of two", []Expr{long(100), long(100), long(100)},
			Limits{MaxLength: 2*(longLen+100) + 3}, []int{1, 1, 1}},
		{"single clause exactly at the limit", []Expr{long(100)}, Limits{MaxLength: longLen + 100}, []int{1}},
		{"an and needs parentheses only with company", []Expr{three},
			Limits{MaxLength: three.EncodedLen()}, []int{3}},
		{"parentheses counted", []Expr{three, three},
			Limits{MaxLength: 2*three.EncodedLen() + 4 + 11}, []int{3, 3}},
		{"parentheses counted, fits", []Expr{three, three},
			Limits{MaxLength: 2*three.EncodedLen() + 4 + 12}, []int{6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			packed := checkPack(t, tt.clauses, tt.limits, nil)
			require.Equal(t, tt.want, counts(packed))
		})
	}
}

func TestPackKeepsClausesAndOrder(t *testing.T) {
	clauses := ranges(12)
	packed, err := Pack(clauses, Limits{})
	require.NoError(t, err)
	require.Len(t, packed, 3)
	require.Equal(t, Or(clauses[0:5]...), packed[0])
	require.Equal(t, Or(clauses[5:10]...), packed[1])
	require.Equal(t, Or(clauses[10:]...), packed[2])
	require.Equal(t, "(PartitionKey eq 's''10' and RowKey ge '0001' and RowKey lt '0009') or "+
		"(PartitionKey eq 's''11' and RowKey ge '0001' and RowKey lt '0009')", packed[2].String())

	one, err := Pack(clauses[:1], Limits{})
	require.NoError(t, err)
	require.Equal(t, []Expr{clauses[0]}, one)
}

func TestPackErrors(t *testing.T) {
	tests := []struct {
		name    string
		clauses []Expr
		limits  Limits
		err     error
		msg     string
	}{
		{"too many comparisons", []Expr{Eq("a", "b"), And(cmps(16)...)}, Limits{}, ErrClauseTooLarge,
			"filter: clause exceeds the filter limits: clause 1 has 16 comparisons and encoded length 465 (limits 15 and 4000)"},
		{"over a custom count", []Expr{ranges(1)[0]}, Limits{MaxComparisons: 2}, ErrClauseTooLarge,
			"filter: clause exceeds the filter limits: clause 0 has 3 comparisons and encoded length 80 (limits 2 and 4000)"},
		{"too long", []Expr{Eq("a", "b"), Eq("a", "c"), Eq("PartitionKey", strings.Repeat("'", 700))}, Limits{}, ErrClauseTooLarge,
			"filter: clause exceeds the filter limits: clause 2 has 1 comparisons and encoded length 4222 (limits 15 and 4000)"},
		{"one byte too long", []Expr{Eq("a", "b")}, Limits{MaxLength: len("a+eq+%27b%27") - 1}, ErrClauseTooLarge,
			"filter: clause exceeds the filter limits: clause 0 has 1 comparisons and encoded length 12 (limits 15 and 11)"},
		{"empty clause", []Expr{Eq("a", "b"), {}}, Limits{}, ErrEmptyClause, "filter: empty clause: clause 1"},
		{"or with an empty operand", []Expr{Or(Eq("a", "b"), Expr{})}, Limits{}, ErrEmptyClause, "filter: empty clause: clause 0"},
		{"negative count", cmps(1), Limits{MaxComparisons: -1}, ErrInvalidLimits, "filter: invalid limits: {MaxComparisons:-1 MaxLength:0}"},
		{"negative length", cmps(1), Limits{MaxLength: -1}, ErrInvalidLimits, "filter: invalid limits: {MaxComparisons:0 MaxLength:-1}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			packed, err := Pack(tt.clauses, tt.limits)
			require.ErrorIs(t, err, tt.err)
			require.EqualError(t, err, tt.msg)
			require.Nil(t, packed)
		})
	}
}

// pieces make random keys: quotes, OData and URL syntax, and characters whose UTF-16 order
// differs from their byte order.
var pieces = []string{"a", "b", "z", "0", "9", " ", "'", "''", "é", "\uFFFD", "\uE000", "\U0001F600",
	"\U00010000", "%", "+", "&", "(", ")", " or ", "~", "' or PartitionKey ne '", "PartitionKey"}

func randString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(5) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func TestPackEquivalentRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		pks := make([]string, 1+r.IntN(4))
		for i := range pks {
			pks[i] = randString(r)
		}
		rks := make([]string, 1+r.IntN(12))
		for i := range rks {
			rks[i] = randString(r)
		}
		var entities []map[string]string
		for _, pk := range pks {
			for _, rk := range rks {
				entities = append(entities, map[string]string{"PartitionKey": pk, "RowKey": rk})
			}
		}
		entities = append(entities, map[string]string{"PartitionKey": pks[0]}, map[string]string{})
		key := func(pool []string) string { // mostly an existing key, so that bounds are hit exactly
			if r.IntN(4) == 0 {
				return randString(r)
			}
			return pool[r.IntN(len(pool))]
		}

		clauses := make([]Expr, r.IntN(60))
		maxLen := 0
		for i := range clauses {
			x, a, b := key(pks), key(rks), key(rks)
			switch r.IntN(6) {
			case 0:
				clauses[i] = Eq("PartitionKey", x)
			case 1:
				clauses[i] = And(Eq("PartitionKey", x), Eq("RowKey", a))
			case 2:
				clauses[i] = Or(Eq("PartitionKey", x), Gt("RowKey", a))
			case 3:
				clauses[i] = And(Eq("PartitionKey", x), Or(Le("RowKey", a), Ne("RowKey", b)))
			default:
				clauses[i] = And(Eq("PartitionKey", x), Ge("RowKey", a), Lt("RowKey", b))
			}
			maxLen = max(maxLen, clauses[i].EncodedLen())
		}
		lim := Limits{MaxComparisons: 3 + r.IntN(14), MaxLength: maxLen + r.IntN(3*maxLen+1)}
		if r.IntN(5) == 0 {
			lim = Limits{}
		}
		t.Run(fmt.Sprint(iter), func(t *testing.T) {
			checkPack(t, clauses, lim, entities)
		})
	}
}
