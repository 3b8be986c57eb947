package filter_test

import (
	"fmt"

	"github.com/seed71701133/tablets/filter"
)

// A range query for one series whose name holds a quote: the value is escaped by Quote, so
// it stays one string literal.
func Example_rangeFilter() {
	series := "O'Brien's boiler"
	f := filter.And(
		filter.Eq("PartitionKey", series),
		filter.Ge("RowKey", "0001700000000"),
		filter.Lt("RowKey", "0001700086400"),
	)
	fmt.Println(f)
	fmt.Println(f.Comparisons(), "comparisons")
	fmt.Println(f.Eval(map[string]string{"PartitionKey": series, "RowKey": "0001700003600"}))
	// Output:
	// PartitionKey eq 'O''Brien''s boiler' and RowKey ge '0001700000000' and RowKey lt '0001700086400'
	// 3 comparisons
	// true
}

// Reading 40 series at once: each clause has 3 comparisons, so at most 5 clauses fit in a
// filter under Azure's limit of 15 comparisons, and Pack returns 8 filters.
func ExamplePack() {
	clauses := make([]filter.Expr, 40)
	for i := range clauses {
		clauses[i] = filter.And(
			filter.Eq("PartitionKey", fmt.Sprintf("sensor-%02d", i)),
			filter.Ge("RowKey", "0001700000000"),
			filter.Lt("RowKey", "0001700086400"),
		)
	}
	filters, err := filter.Pack(clauses, filter.Limits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, f := range filters {
		fmt.Printf("filter %d: %d comparisons, %d bytes encoded\n", i, f.Comparisons(), f.EncodedLen())
	}
	fmt.Println(filters[7])
	// Output:
	// filter 0: 15 comparisons, 541 bytes encoded
	// filter 1: 15 comparisons, 541 bytes encoded
	// filter 2: 15 comparisons, 541 bytes encoded
	// filter 3: 15 comparisons, 541 bytes encoded
	// filter 4: 15 comparisons, 541 bytes encoded
	// filter 5: 15 comparisons, 541 bytes encoded
	// filter 6: 15 comparisons, 541 bytes encoded
	// filter 7: 15 comparisons, 541 bytes encoded
	// (PartitionKey eq 'sensor-35' and RowKey ge '0001700000000' and RowKey lt '0001700086400') or (PartitionKey eq 'sensor-36' and RowKey ge '0001700000000' and RowKey lt '0001700086400') or (PartitionKey eq 'sensor-37' and RowKey ge '0001700000000' and RowKey lt '0001700086400') or (PartitionKey eq 'sensor-38' and RowKey ge '0001700000000' and RowKey lt '0001700086400') or (PartitionKey eq 'sensor-39' and RowKey ge '0001700000000' and RowKey lt '0001700086400')
}

// Parse reads a filter back, for example to check a plan.
func ExampleParse() {
	e, err := filter.Parse("PartitionKey eq 'a''b' and (RowKey lt '1' or RowKey ge '5')")
	fmt.Println(e.Comparisons(), err)
	fmt.Println(e.Eval(map[string]string{"PartitionKey": "a'b", "RowKey": "7"}))
	// Output:
	// 3 <nil>
	// true
}
