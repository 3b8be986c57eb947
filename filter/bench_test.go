package filter

import (
	"fmt"
	"testing"
)

// Compare before and after a change with:
//
//	go test -run '^$' -bench . -count 6 ./filter | tee new.txt && benchstat old.txt new.txt

// rangeFilter is a typical 6-comparison filter: two series over one time range.
func rangeFilter() Expr {
	return Or(
		And(Eq("PartitionKey", "building-7/floor-3'temp"), Ge("RowKey", "0001700000000"), Lt("RowKey", "0001700086400")),
		And(Eq("PartitionKey", "building-7/floor-3'hum"), Ge("RowKey", "0001700000000"), Lt("RowKey", "0001700086400")),
	)
}

func BenchmarkQuote(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = Quote("O'Brien's boiler room")
	}
}

func BenchmarkString(b *testing.B) {
	e := rangeFilter()
	b.ReportAllocs()
	for b.Loop() {
		_ = e.String()
	}
}

// BenchmarkBuildString includes building the expression tree.
func BenchmarkBuildString(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = rangeFilter().String()
	}
}

func BenchmarkParse(b *testing.B) {
	s := rangeFilter().String()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPack(b *testing.B) {
	clauses := make([]Expr, 200)
	for i := range clauses {
		clauses[i] = And(Eq("PartitionKey", fmt.Sprintf("series-%03d'x", i)), Ge("RowKey", "0001700000000"), Lt("RowKey", "0001700086400"))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Pack(clauses, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackString includes rendering every packed filter.
func BenchmarkPackString(b *testing.B) {
	clauses := make([]Expr, 200)
	for i := range clauses {
		clauses[i] = And(Eq("PartitionKey", fmt.Sprintf("series-%03d'x", i)), Ge("RowKey", "0001700000000"), Lt("RowKey", "0001700086400"))
	}
	b.ReportAllocs()
	for b.Loop() {
		fs, err := Pack(clauses, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range fs {
			_ = f.String()
		}
	}
}
