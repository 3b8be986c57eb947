package advanced

import (
	"fmt"
	"math/bits"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/rounding"
)

// layout is the advanced key layout. All quantities are in resolution units.
type layout struct {
	format    rounding.KeyFormat
	rowUnits  uint64 // units per row: the slots of a row
	partUnits uint64 // units per partition
	limits    filter.Limits
}

func (l layout) Name() string { return "advanced" }

func (l layout) ID() string {
	return fmt.Sprintf("advanced/1/%d/%d/%d", l.format.Resolution, l.rowUnits, l.partUnits)
}
func (l layout) Format() rounding.KeyFormat { return l.format }
func (l layout) Select() string             { return "" }
func (l layout) Granule() uint64            { return l.rowUnits }

func escapeSeries(series string) string { return partkey.Escape(series) }

func (l layout) partitionKey(escaped string, partStart uint64) string {
	return partkey.Key(l.format, escaped, partStart)
}

func (l layout) key(u uint64) string { return string(l.format.AppendUnits(nil, u)) }

func (l layout) WriteAction() aztables.TransactionType { return aztables.TransactionTypeInsertMerge }

// Rows: a row per RowFactor of time holding a slot per point, filed under its partition.
func (l layout) Rows(series string, units []uint64, values []float64, emit func(engine.Row)) {
	escaped := escapeSeries(series)
	for i := 0; i < len(units); {
		start := units[i] / l.rowUnits * l.rowUnits
		j := i + 1
		for j < len(units) && units[j] < start+l.rowUnits {
			j++
		}
		pk, rk := l.partitionKey(escaped, start/l.partUnits*l.partUnits), l.key(start)
		_, body := l.Encode(pk, rk, units[i:j], values[i:j])
		emit(engine.Row{PartitionKey: pk, RowKey: rk, Body: body, From: i, To: j})
		i = j
	}
}

// Encode writes the row's points as slots v<unit - row start>, under the same keys.
func (l layout) Encode(partitionKey, rowKey string, units []uint64, values []float64) (string, []byte) {
	b := make([]byte, 0, 64+len(partitionKey)+len(rowKey)+24*len(units))
	b = entity.AppendKeys(b, partitionKey, rowKey)
	for i, u := range units {
		b = entity.AppendSlot(b, int(u%l.rowUnits), values[i])
	}
	return rowKey, entity.AppendEnd(b)
}

func (l layout) KeySelect() string { return "PartitionKey,RowKey" }

// Span is the row's slots: [row start, row start + RowFactor).
func (l layout) Span(e *entity.Entity) (uint64, uint64, error) {
	start, err := l.format.ParseUnitsBytes(e.RowKey)
	if err != nil || start%l.rowUnits != 0 {
		return 0, 0, &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: "RowKey is not a row start of this layout"}
	}
	return start, start + l.rowUnits - 1, nil
}

func (l layout) ValidateSeries(series string) error {
	// The longest clause a read sends names the series twice: it must fit one filter.
	return partkey.ValidateSeries("advanced", l.format, series, func() filter.Expr { return l.AtOrAfter(series, 0) }, l.limits)
}

// Clauses: the partial partition at the start (RowKey from the first row), the partitions
// wholly inside as one PartitionKey range, the partial partition at the end (RowKey up to
// the last row). Six comparisons at most.
func (l layout) Clauses(series string, from, to uint64) []filter.Expr {
	firstRow, lastRow := from/l.rowUnits*l.rowUnits, (to-1)/l.rowUnits*l.rowUnits
	firstPart, lastPart := from/l.partUnits*l.partUnits, (to-1)/l.partUnits*l.partUnits
	var head, tail filter.Expr
	if firstRow > firstPart {
		head = filter.Ge("RowKey", l.key(firstRow))
	}
	if lastRow < lastPart+l.partUnits-l.rowUnits {
		tail = filter.Le("RowKey", l.key(lastRow))
	}
	return partkey.Clauses(l.format, escapeSeries(series), l.partUnits, firstPart, lastPart, head, tail)
}

// AtOrAfter selects the rows of series starting at or after unit u.
func (l layout) AtOrAfter(series string, u uint64) filter.Expr {
	escaped := escapeSeries(series)
	p := u / l.partUnits * l.partUnits
	return filter.Or(
		filter.And(filter.Eq("PartitionKey", l.partitionKey(escaped, p)), filter.Ge("RowKey", l.key(u))),
		filter.And(filter.Gt("PartitionKey", l.partitionKey(escaped, p)), filter.Lt("PartitionKey", partkey.End(escaped))),
	)
}

// Owns reports whether partitionKey is escape(series) + "|" + a partition start.
func (l layout) Owns(partitionKey []byte, series string) bool {
	return partkey.Owns(l.format, partitionKey, series)
}

// Points yields the slots of a row in slot order.
func (l layout) Points(e *entity.Entity, yield func(t uint64, v float64)) error {
	bad := func(reason string) error {
		return &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: reason}
	}
	rowStart, err := l.format.ParseUnitsBytes(e.RowKey)
	if err != nil || rowStart%l.rowUnits != 0 {
		return bad("RowKey is not a row start of this layout")
	}
	if len(e.PartitionKey) < l.format.Width {
		return bad("PartitionKey is not of this layout")
	}
	partStart, err := l.format.ParseUnitsBytes(e.PartitionKey[len(e.PartitionKey)-l.format.Width:])
	if err != nil || partStart != rowStart/l.partUnits*l.partUnits {
		return bad("PartitionKey and RowKey disagree (a row of another layout?)")
	}
	var values [entity.MaxUserProperties]float64
	var present [4]uint64 // bit set of slots
	for _, p := range e.Props {
		slot, ok := entity.ParseSlotName(p.Name)
		if !ok || uint64(slot) >= l.rowUnits {
			return bad(fmt.Sprintf("property %q is not a slot of this layout", p.Name))
		}
		values[slot] = p.Value
		present[slot/64] |= 1 << (slot % 64)
	}
	for w, word := range present {
		for word != 0 {
			slot := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			yield(rowStart+uint64(slot), values[slot])
		}
	}
	return nil
}
