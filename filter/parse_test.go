package filter

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Expr
	}{
		{"", Expr{}},
		{"   ", Expr{}},
		{"PartitionKey eq 'a'", Eq("PartitionKey", "a")},
		{"  PartitionKey\teq\t'a'  ", Eq("PartitionKey", "a")},
		{"PartitionKey eq''", Eq("PartitionKey", "")},
		{"PartitionKey eq ''''", Eq("PartitionKey", "'")},
		{"PartitionKey eq 'O''Brien'", Eq("PartitionKey", "O'Brien")},
		{"PartitionKey eq 'a and b or (c)'", Eq("PartitionKey", "a and b or (c)")},
		{"a eq '1' or b eq '2' and c eq '3'", Or(Eq("a", "1"), And(Eq("b", "2"), Eq("c", "3")))},
		{"a eq '1' and b eq '2' or c eq '3'", Or(And(Eq("a", "1"), Eq("b", "2")), Eq("c", "3"))},
		{"(a eq '1' or b eq '2') and c eq '3'", And(Or(Eq("a", "1"), Eq("b", "2")), Eq("c", "3"))},
		{"((a eq '1'))", Eq("a", "1")},
		{"(a eq '1')and(b eq '2')", And(Eq("a", "1"), Eq("b", "2"))},
		{"(a eq '1' and b eq '2') and c eq '3'", And(Eq("a", "1"), Eq("b", "2"), Eq("c", "3"))},
		{"a ne '1' and a gt '2' and a ge '3' and a lt '4' and a le '5'",
			And(Ne("a", "1"), Gt("a", "2"), Ge("a", "3"), Lt("a", "4"), Le("a", "5"))},
		{"order eq 'x' or andy eq 'y'", Or(Eq("order", "x"), Eq("andy", "y"))},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"PartitionKey",
		"PartitionKey eq",
		"PartitionKey eq a",
		"PartitionKey eq 1",
		"PartitionKey eq 'a",
		"PartitionKey eq 'a''",
		"PartitionKey EQ 'a'",
		"PartitionKey eq 'a' AND RowKey eq 'b'",
		"PartitionKey eq 'a' and",
		"PartitionKey eq 'a' or",
		"PartitionKey eq 'a' xor RowKey eq 'b'",
		"PartitionKey eq 'a' RowKey eq 'b'",
		"not PartitionKey eq 'a'",
		"(PartitionKey eq 'a'",
		"PartitionKey eq 'a')",
		"()",
		"and eq 'a'",
		"1a eq 'a'",
		"Prop eq true",
		"startswith(PartitionKey, 'a')",
		"PartitionKey eq 'a'\n",
		"PartitionKey eq 'a' and ()",
		strings.Repeat("(", maxDepth+1) + "a eq 'b'" + strings.Repeat(")", maxDepth+1),
	} {
		_, err := Parse(in)
		require.ErrorIs(t, err, ErrSyntax, "%q", in)
	}
	_, err := Parse("a eq 'b' and c")
	require.EqualError(t, err, "filter: syntax error at offset 14: expected eq, ne, gt, ge, lt or le")
	deep := strings.Repeat("(", maxDepth) + "a eq 'b'" + strings.Repeat(")", maxDepth)
	e, err := Parse(deep)
	require.NoError(t, err)
	require.Equal(t, Eq("a", "b"), e)
}
