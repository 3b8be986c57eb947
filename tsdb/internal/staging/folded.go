package staging

import (
	"slices"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/stageenc"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// FoldedFloats returns, by series of names, the float points that the Folds of receipts
// (changes of the raw change log, oldest first) wrote into the raw tables, as each wrote
// them (the last write of a millisecond): from what this process knows without a request,
// the entities its listings had (each receipt's set, matched by its digest) and their
// columns in the Cache at the ETags the Fold read. A series is left out when some of it is
// not known so (a receipt no listing matches, a column no longer cached), or when two
// receipts hold one of its milliseconds (which of them the raw tables keep is the Folds'
// priorities'): its reader reads the tables.
//
// It is what lets a read cache of raw samples take in a Fold without reading what it
// moved again (package raw): a refreshed panel over thousands of series read their folded
// minutes back from the raw tables after every Fold, a request per seven series.
func (st *Table) FoldedFloats(receipts []changelog.Receipt, names []string) map[string][]tablets.Point {
	if st.cache == nil || len(receipts) == 0 || len(names) == 0 {
		return nil
	}
	sets := make([][]listedEntity, len(receipts))
	for i, r := range receipts {
		var ok bool
		if sets[i], ok = st.receiptEntities(r); !ok {
			return nil
		}
	}
	want := make(map[string]bool, len(names))
	byColumn := map[int][]string{}
	for _, name := range names {
		if !want[name] {
			want[name] = true
			_, c := Hash(name)
			byColumn[c] = append(byColumn[c], name)
		}
	}
	unknown := map[string]bool{}
	out := make(map[string][]tablets.Point, len(want))
	table := st.names.Staging()
	for _, set := range sets {
		written := map[string][]Point{}
		for _, le := range set {
			e, ok := st.cache.entity(table, le)
			if !ok {
				return nil // not cached at the ETag the Fold read: no series is known
			}
			if e.version != Version {
				continue // histogram samples only
			}
			stamp, seq, ok := StampOf([]byte(le.rk))
			if !ok {
				return nil
			}
			d := Decoded{Stamp: stamp, Seq: seq}
			add := func(r int, s stageenc.Series) {
				for i, ms := range s.Times {
					written[s.Key] = append(written[s.Key], Point{MS: ms, Value: s.Values[i], Stamp: d.Stamp, Record: d.Record(r)})
				}
			}
			if whole, ok := e.cols[wholeEntity]; ok {
				for r, s := range whole.series {
					if want[s.Key] {
						add(r, s)
					}
				}
				continue
			}
			for c, cnames := range byColumn {
				col, ok := e.cols[c]
				if !ok && e.encoded != nil {
					var err error
					col, err = e.decode(c)
					ok = err == nil
				}
				if !ok {
					for _, name := range cnames {
						unknown[name] = true
					}
					continue
				}
				for r, s := range col.series {
					if want[s.Key] {
						add(r, s)
					}
				}
			}
		}
		for name, ws := range written {
			pts := LastWrites[tablets.Point](ws)
			had := out[name]
			if len(had) > 0 && collides(had, pts) {
				unknown[name] = true
			}
			out[name] = mergeSorted(had, pts)
		}
	}
	for name := range want {
		if unknown[name] {
			delete(out, name)
		} else if _, ok := out[name]; !ok {
			out[name] = nil // known: none of its points were folded
		}
	}
	return out
}

// collides reports whether sorted a and b hold a point at the same time.
func collides(a, b []tablets.Point) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch c := a[i].Time.Compare(b[j].Time); {
		case c == 0:
			return true
		case c < 0:
			i++
		default:
			j++
		}
	}
	return false
}

// mergeSorted is the points of sorted a and b, sorted (b's first where both hold a time).
func mergeSorted(a, b []tablets.Point) []tablets.Point {
	if len(a) == 0 {
		return b
	}
	out := append(slices.Clone(a), b...)
	slices.SortStableFunc(out, func(x, y tablets.Point) int { return x.Time.Compare(y.Time) })
	return out
}

// receiptEntities returns the entities receipt r names, as this Table's listings knew
// them: those listed now or departed since (departed), of the arrival buckets r names,
// when they are r.Count and their digest is r's; else false.
func (st *Table) receiptEntities(r changelog.Receipt) ([]listedEntity, bool) {
	l := &st.listing
	l.mu.Lock()
	defer l.mu.Unlock()
	if set, ok := l.receipts[r.Digest]; ok {
		return set, true
	}
	inBuckets := func(pk string) bool {
		start := uint64(BucketEnd(pk).Add(-Bucket).Unix())
		return start >= r.From && start < r.Horizon && pk != LogPartition
	}
	var set []listedEntity
	var keys []changelog.ReceiptEntity
	for k, p := range l.byKey {
		if inBuckets(k[0]) {
			set = append(set, listedEntity{pk: k[0], rk: k[1], etag: p.etag})
		}
	}
	for k, d := range l.departed {
		if inBuckets(k[0]) {
			set = append(set, listedEntity{pk: k[0], rk: k[1], etag: d.etag})
		}
	}
	if uint64(len(set)) != r.Count {
		return nil, false // not remembered: a later listing may know them (it is not kept)
	}
	for _, le := range set {
		keys = append(keys, changelog.ReceiptEntity{PartitionKey: le.pk, RowKey: le.rk, ETag: le.etag})
	}
	if changelog.ReceiptDigest(keys) != r.Digest {
		return nil, false
	}
	if l.receipts == nil || len(l.receipts) >= maxReceipts {
		l.receipts = map[[16]byte][]listedEntity{}
	}
	l.receipts[r.Digest] = set
	return set, true
}
