package tsdb

import (
	"cmp"
	"slices"

	"github.com/seed71701133/tablets/internal/histenc"
)

// histMerger holds the samples of chunks that may hold the same milliseconds until they are
// final, and keeps for each millisecond the sample of the chunk with the highest priority
// (the latest write). The zero value is ready to use.
type histMerger struct {
	held []heldSample
	seq  int
}

type heldSample struct {
	s    histenc.Sample
	prio uint64
	seq  int // arrival order: among equal priorities (the same chunk read twice) the last
}

func (m *histMerger) add(s histenc.Sample, prio uint64) {
	m.held = append(m.held, heldSample{s, prio, m.seq})
	m.seq++
}

// release passes emit the samples below bound in time order, one per millisecond, and
// forgets them. It returns false when emit does.
func (m *histMerger) release(bound uint64, emit func(histenc.Sample) bool) bool {
	slices.SortFunc(m.held, func(a, b heldSample) int {
		return cmp.Or(cmp.Compare(a.s.Unit, b.s.Unit), cmp.Compare(b.prio, a.prio), cmp.Compare(b.seq, a.seq))
	})
	i := 0
	for ; i < len(m.held) && m.held[i].s.Unit < bound; i++ {
		if i > 0 && m.held[i].s.Unit == m.held[i-1].s.Unit {
			continue
		}
		if !emit(m.held[i].s) {
			return false
		}
	}
	m.held = append(m.held[:0], m.held[i:]...)
	return true
}

func (m *histMerger) reset() { m.held = m.held[:0] }
