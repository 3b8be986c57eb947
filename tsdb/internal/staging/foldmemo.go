package staging

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/chunkenc"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// foldMemo keeps what this process's last Folds wrote into the raw tables, by the digests
// of their receipts, for FoldedFloats and FoldedHists: a raw cache takes such a Fold in
// without a request whenever the Fold ends. From the staging entities alone it could only
// while the staging cache still held every entity the Fold moved: on a busy account a
// Fold ends minutes after its bucket closed, and then a refresh read every series' folded
// minutes back from the raw tables (soak run 69: 47,000 series, while the next Fold wrote).
//
// A Fold's float points are kept encoded (chunkenc, a few bytes a point: the soak's 750,000
// points of a tenant's bucket in 2.4 MB with the series' names), its histogram samples
// as they are (rare). It keeps the last memoFolds Folds, up to memoBytes in all. Safe for
// concurrent use.
type foldMemo struct {
	mu    sync.Mutex
	folds []*memoFold // oldest first
	bytes int64
}

const (
	// memoFolds is how many Folds a foldMemo keeps: a refresh takes in every Fold since
	// its entry was read, and refreshes come every few seconds or minutes, Folds every few
	// minutes at most.
	memoFolds = 3
	// memoBytes bounds a foldMemo: a Fold larger is not kept.
	memoBytes = 32 << 20
	// memoEntryBytes is what a series' entry costs a memoFold besides its samples and name.
	memoEntryBytes = 64
)

// memoFold is what one Fold wrote: each series' float points (encoded) and histogram
// samples. A series in neither map was not written by it.
type memoFold struct {
	digest [16]byte
	mu     sync.Mutex // the Fold's writers add to it at once
	floats map[string][]byte
	hists  map[string][]histenc.Sample
	bytes  int64
	// lost is set when a series' samples could not be kept (a time before the epoch, which
	// the codec does not hold; or the Fold grew past memoBytes): the Fold is not kept.
	lost bool
}

func newMemoFold() *memoFold {
	return &memoFold{floats: map[string][]byte{}, hists: map[string][]histenc.Sample{}}
}

// addFloats notes that the Fold wrote points (sorted, one a millisecond) of series.
func (f *memoFold) addFloats(series string, points []tablets.Point) {
	if f == nil || len(points) == 0 {
		return
	}
	times, values := make([]uint64, len(points)), make([]float64, len(points))
	ok := true
	for i, p := range points {
		ms := p.Time.UnixMilli()
		if ms < 0 || i > 0 && uint64(ms) <= times[i-1] {
			ok = false
			break
		}
		times[i], values[i] = uint64(ms), p.Value
	}
	var enc []byte
	if ok {
		enc = chunkenc.Append(nil, times, values)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bytes += int64(len(enc)+len(series)) + memoEntryBytes
	if !ok || f.bytes > memoBytes {
		f.lost = true
		f.floats, f.hists = nil, nil
	}
	if !f.lost {
		f.floats[series] = enc
	}
}

// addHists notes that the Fold wrote samples (sorted, one a millisecond) of series.
func (f *memoFold) addHists(series string, samples []histenc.Sample) {
	if f == nil || len(samples) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bytes += int64(len(samples))*HistBytes + int64(len(series)) + memoEntryBytes
	if f.bytes > memoBytes {
		f.lost = true
		f.floats, f.hists = nil, nil
	}
	if !f.lost {
		f.hists[series] = slices.Clone(samples)
	}
}

// keep keeps f, the Fold of receipt digest digest, dropping the oldest Folds beyond
// memoFolds and memoBytes.
func (m *foldMemo) keep(digest [16]byte, f *memoFold) {
	if m == nil || f == nil || f.lost {
		return
	}
	f.digest = digest
	m.mu.Lock()
	defer m.mu.Unlock()
	m.folds = append(m.folds, f)
	m.bytes += f.bytes
	for len(m.folds) > memoFolds || m.bytes > memoBytes {
		m.bytes -= m.folds[0].bytes
		m.folds[0] = nil
		m.folds = m.folds[1:]
	}
}

// Kept returns how many Folds the Table keeps what they wrote of (Config.KeepFolds), and
// the bytes it counts for them.
func (st *Table) Kept() (folds int, bytes int64) {
	m := st.folds
	if m == nil {
		return 0, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.folds), m.bytes
}

// find returns the kept Folds of receipts, in their order, or false when one is not kept.
func (m *foldMemo) find(receipts []changelog.Receipt) ([]*memoFold, bool) {
	if m == nil || len(receipts) == 0 {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*memoFold, len(receipts))
	for i, r := range receipts {
		for _, f := range m.folds {
			if f.digest == r.Digest {
				out[i] = f
			}
		}
		if out[i] == nil {
			return nil, false
		}
	}
	return out, true
}

// memoFloats is FoldedFloats from the Folds m keeps, when it keeps every one of receipts.
func (m *foldMemo) memoFloats(receipts []changelog.Receipt, names []string) (map[string][]tablets.Point, bool) {
	return memoSamples(m, receipts, names, func(f *memoFold, name string) ([]tablets.Point, bool) {
		enc, ok := f.floats[name]
		if !ok {
			return nil, true
		}
		var pts []tablets.Point
		err := chunkenc.Decode(enc, func(t uint64, v float64) {
			pts = append(pts, tablets.Point{Time: time.UnixMilli(int64(t)).UTC(), Value: v})
		})
		return pts, err == nil
	}, func(p tablets.Point) int64 { return p.Time.UnixMilli() })
}

// memoHists is FoldedHists from the Folds m keeps, when it keeps every one of receipts.
func (m *foldMemo) memoHists(receipts []changelog.Receipt, names []string) (map[string][]histenc.Sample, bool) {
	return memoSamples(m, receipts, names, func(f *memoFold, name string) ([]histenc.Sample, bool) {
		return f.hists[name], true
	}, func(s histenc.Sample) int64 { return int64(s.Unit) })
}

// memoSamples is memoFloats and memoHists: by series of names, the samples the Folds of
// receipts wrote (of: one Fold's of a series, false when they cannot be read back), sorted
// (ms: a sample's millisecond). A series two of the Folds wrote a millisecond of is left
// out, as FoldedFloats leaves it: which of them the raw tables keep is the priorities'.
func memoSamples[S any](m *foldMemo, receipts []changelog.Receipt, names []string,
	of func(f *memoFold, name string) ([]S, bool), ms func(S) int64) (map[string][]S, bool) {
	folds, ok := m.find(receipts)
	if !ok {
		return nil, false
	}
	out := make(map[string][]S, len(names))
	for _, name := range names {
		var all []S
		known := true
		for _, f := range folds {
			samples, ok := of(f, name)
			if !ok {
				known = false
				break
			}
			all = append(all, samples...)
		}
		if !known {
			continue
		}
		if len(folds) > 1 {
			slices.SortStableFunc(all, func(a, b S) int { return cmp.Compare(ms(a), ms(b)) })
			for i := 1; i < len(all); i++ {
				if ms(all[i]) == ms(all[i-1]) {
					known = false
					break
				}
			}
		}
		if known {
			if all == nil {
				all = []S{}
			}
			out[name] = all
		}
	}
	return out, true
}
