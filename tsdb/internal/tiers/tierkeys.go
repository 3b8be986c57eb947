package tiers

import (
	"cmp"
	"slices"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/blockenc"
)

// Layout is how a database's tier tables key their blocks (docs/format.md, "Packed tier
// blocks"). The database records it in its catalog; package tsdb decides it at Open.
type Layout int

const (
	// LayoutSeries keys a block by its series (PartitionKey) and start (RowKey): a rollup
	// writes a transaction a series and block. The layout of a database whose tier tables
	// were made before the layout was recorded.
	LayoutSeries Layout = iota + 1
	// LayoutPacked keys a block by the first two characters of its series (PartitionKey),
	// and by the series and start (RowKey): a rollup writes up to 100 series' blocks a
	// transaction. The layout of a database made since.
	LayoutPacked
)

// tierKeys are the keys and filters of the blocks of a layout.
type tierKeys struct{ layout Layout }

func (k tierKeys) packed() bool { return k.layout == LayoutPacked }

// keys are the PartitionKey and RowKey of series' block starting at start.
func (k tierKeys) keys(series string, start uint64) (string, string) {
	if k.packed() {
		return blockenc.PackedPartition(series), blockenc.PackedRowKey(series, start)
	}
	return series, blockKey(start)
}

// partition is the PartitionKey of series' blocks.
func (k tierKeys) partition(series string) string {
	pk, _ := k.keys(series, 0)
	return pk
}

// parse reads the series and start of an entity of a tier table of the layout: ok is false
// for keys no block of the layout has.
func (k tierKeys) parse(pk, rk string) (series string, start uint64, ok bool) {
	if k.packed() {
		return blockenc.ParsePacked(pk, rk)
	}
	s, ok := blockenc.ParseKey(rk)
	return pk, s, ok && pk != ""
}

// maxPackedPerFilter keeps a packed read's filter of a group under 15 comparisons: the
// range of their partitions (2) and a RowKey range a series (2).
const maxPackedPerFilter = 6

// groups cuts names (distinct) into the groups a filter each reads (groupFilter):
// maxSeriesPerFilter at a time in the series layout, maxPackedPerFilter packed, in the
// order of their keys.
func (k tierKeys) groups(names []string) [][]string {
	per := maxSeriesPerFilter
	if k.packed() {
		per = maxPackedPerFilter
		names = slices.SortedFunc(slices.Values(names), k.compareScan)
	}
	var out [][]string
	for i := 0; i < len(names); i += per {
		out = append(out, names[i:min(i+per, len(names))])
	}
	return out
}

// groupFilter is the filter of the blocks of group (one of groups') starting in [blo, bhi)
// (Unix seconds): packed, their RowKey ranges within the range of their partitions (a
// query of several partitions scans them, as the series layout's equalities of
// PartitionKeys scan the table).
func (k tierKeys) groupFilter(group []string, blo, bhi uint64) filter.Expr {
	if !k.packed() {
		return filter.And(filter.Ge("RowKey", blockKey(blo)), filter.Lt("RowKey", blockKey(bhi)), anyPartition(group))
	}
	ranges := make([]filter.Expr, len(group))
	pks := make([]string, len(group))
	for i, s := range group {
		pk, lo := k.keys(s, blo)
		_, hi := k.keys(s, bhi)
		pks[i] = pk
		ranges[i] = filter.And(filter.Ge("RowKey", lo), filter.Lt("RowKey", hi))
	}
	first, last := slices.MinFunc(pks, filter.CompareUTF16), slices.MaxFunc(pks, filter.CompareUTF16)
	if first == last {
		return filter.And(filter.Eq("PartitionKey", first), filter.Or(ranges...))
	}
	return filter.And(filter.Ge("PartitionKey", first), filter.Le("PartitionKey", last), filter.Or(ranges...))
}

// scanFilter is the filter of the blocks starting in [blo, bhi) (Unix seconds) of the
// series names, and of the series between them in the order of the keys: the series
// layout's partitions from the first name to the last; packed, the partitions of the
// names' and the RowKeys from the smallest of theirs to the largest, the starts filtered on
// T.
func (k tierKeys) scanFilter(names []string, blo, bhi uint64) filter.Expr {
	if !k.packed() {
		return filter.And(filter.Ge("PartitionKey", slices.MinFunc(names, filter.CompareUTF16)), filter.Le("PartitionKey", slices.MaxFunc(names, filter.CompareUTF16)),
			filter.Ge("RowKey", blockKey(blo)), filter.Lt("RowKey", blockKey(bhi)))
	}
	pks, los, his := make([]string, len(names)), make([]string, len(names)), make([]string, len(names))
	for i, s := range names {
		pks[i], los[i] = k.keys(s, blo)
		_, his[i] = k.keys(s, bhi)
	}
	return filter.And(filter.Ge("PartitionKey", slices.MinFunc(pks, filter.CompareUTF16)), filter.Le("PartitionKey", slices.MaxFunc(pks, filter.CompareUTF16)),
		filter.Ge("RowKey", slices.MinFunc(los, filter.CompareUTF16)), filter.Lt("RowKey", slices.MaxFunc(his, filter.CompareUTF16)),
		filter.Ge(blockenc.PropStart, blockKey(blo)), filter.Lt(blockenc.PropStart, blockKey(bhi)))
}

// compareScan orders series as a scan returns their blocks: by their keys at a start.
func (k tierKeys) compareScan(a, b string) int {
	apk, ark := k.keys(a, 0)
	bpk, brk := k.keys(b, 0)
	return cmp.Or(filter.CompareUTF16(apk, bpk), filter.CompareUTF16(ark, brk))
}

// notBefore are the names of a scan whose blocks it has not passed when it returned
// last's (a series): last's and those after it.
func (k tierKeys) notBefore(names []string, last string) []string {
	var out []string
	for _, s := range names {
		if k.compareScan(s, last) >= 0 {
			out = append(out, s)
		}
	}
	return out
}
