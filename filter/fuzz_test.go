package filter

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// Seed corpora are in testdata/fuzz/<FuzzName>/. Run a target with, for example:
//
//	go test -run '^$' -fuzz '^FuzzQuote$' -fuzztime 10s ./filter

// FuzzQuote checks that no value changes the structure of a filter: the text of a
// comparison parses back to exactly that comparison, and the value comes back unchanged.
func FuzzQuote(f *testing.F) {
	f.Fuzz(func(t *testing.T, s, s2 string) {
		q := Quote(s)
		e := Eq("PartitionKey", s)
		text := e.String()
		require.Equal(t, "PartitionKey eq "+q, text)
		require.Equal(t, len(url.QueryEscape(text)), e.EncodedLen())

		g, err := Parse(text)
		require.NoError(t, err)
		require.Equal(t, 1, g.Comparisons())
		require.Equal(t, kindCmp, g.n.kind)
		require.Equal(t, "PartitionKey", g.n.prop)
		require.Equal(t, OpEq, g.n.op)
		require.Equal(t, s, g.n.val)
		require.True(t, g.Eval(map[string]string{"PartitionKey": s}))

		a := And(Eq("PartitionKey", s), Ge("RowKey", s2))
		g, err = Parse(a.String())
		require.NoError(t, err)
		require.Equal(t, a, g)
		require.Equal(t, kindAnd, g.n.kind)
		require.Len(t, g.n.kids, 2)
		require.Equal(t, s, g.n.kids[0].n.val)
		require.Equal(t, s2, g.n.kids[1].n.val)
		require.Equal(t, OpGe, g.n.kids[1].n.op)

		o := Or(a, Lt("RowKey", s+s2))
		g, err = Parse(o.String())
		require.NoError(t, err)
		require.Equal(t, o, g)
		require.Equal(t, 3, g.Comparisons())
		require.Equal(t, len(url.QueryEscape(o.String())), o.EncodedLen())
	})
}

// byteReader turns fuzz bytes into choices; past the end it reads zeros.
type byteReader []byte

func (r *byteReader) next() int {
	if len(*r) == 0 {
		return 0
	}
	b := (*r)[0]
	*r = (*r)[1:]
	return int(b)
}

// str returns up to 5 pieces, or raw bytes (maybe invalid UTF-8) for bytes >= 128.
func (r *byteReader) str() string {
	var b []byte
	for range r.next() % 6 {
		c := r.next()
		if c < 128 {
			b = append(b, pieces[c%len(pieces)]...)
		} else {
			b = append(b, byte(c))
		}
	}
	return string(b)
}

// FuzzPack packs clauses derived from the fuzz bytes and checks with checkPack that the
// filters obey the limits, keep the clauses in order, and select the same entities.
func FuzzPack(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := byteReader(data)
		pks := make([]string, 1+r.next()%4)
		for i := range pks {
			pks[i] = r.str()
		}
		rks := []string{""}
		clauses := make([]Expr, r.next()%64)
		maxLen := 0
		for i := range clauses {
			x := pks[r.next()%len(pks)]
			if r.next()%4 == 0 {
				x = r.str()
			}
			a, b := r.str(), r.str()
			rks = append(rks, a, b)
			switch r.next() % 6 {
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
		lim := Limits{MaxComparisons: 3 + r.next()%14, MaxLength: maxLen + r.next()*r.next()/8}
		if r.next()%5 == 0 {
			lim = Limits{}
		}
		var entities []map[string]string
		for _, pk := range pks {
			for _, rk := range rks {
				entities = append(entities, map[string]string{"PartitionKey": pk, "RowKey": rk})
			}
		}
		if lim.MaxLength == 0 && maxLen > DefaultMaxLength {
			_, err := Pack(clauses, lim)
			require.ErrorIs(t, err, ErrClauseTooLarge)
			return
		}
		checkPack(t, clauses, lim, entities)
	})
}

// FuzzParse checks that Parse never panics, and that whatever it accepts prints back as
// text that parses to the same expression.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil {
			require.ErrorIs(t, err, ErrSyntax)
			return
		}
		text := e.String()
		g, err := Parse(text)
		require.NoError(t, err, text)
		require.Equal(t, e, g, text)
		require.Equal(t, text, g.String())
		require.Equal(t, len(text), e.Len())
		require.Equal(t, len(url.QueryEscape(text)), e.EncodedLen())
	})
}
