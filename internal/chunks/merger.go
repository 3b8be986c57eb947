package chunks

import (
	"cmp"
	"slices"
)

// Merger holds the values of chunks that may hold the same times until they are final,
// and keeps for each time the value of the chunk with the highest priority (the latest
// write). The zero value is ready to use.
type Merger[V any] struct {
	held []held[V]
	seq  int
}

type held[V any] struct {
	u    uint64
	v    V
	prio uint64
	seq  int // arrival order: among equal priorities (the same chunk read twice) the last
}

// Add holds the value at unit u of a chunk of priority prio.
func (m *Merger[V]) Add(u uint64, v V, prio uint64) {
	m.held = append(m.held, held[V]{u, v, prio, m.seq})
	m.seq++
}

// Release passes emit the values below bound in time order, the highest priority's value
// of each time, and forgets them. It returns false when emit does.
func (m *Merger[V]) Release(bound uint64, emit func(u uint64, v V) bool) bool {
	slices.SortFunc(m.held, func(a, b held[V]) int {
		return cmp.Or(cmp.Compare(a.u, b.u), cmp.Compare(b.prio, a.prio), cmp.Compare(b.seq, a.seq))
	})
	i := 0
	for ; i < len(m.held) && m.held[i].u < bound; i++ {
		if i > 0 && m.held[i].u == m.held[i-1].u {
			continue
		}
		if !emit(m.held[i].u, m.held[i].v) {
			return false
		}
	}
	m.held = append(m.held[:0], m.held[i:]...)
	return true
}

// Reset forgets every value held.
func (m *Merger[V]) Reset() { m.held = m.held[:0] }
