package staging

import (
	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// FoldedFloats returns, by series of names, the float points that the Folds of receipts
// (changes of the raw change log, oldest first) wrote into the raw tables, as each wrote
// them (the last write of a millisecond): from what this process knows without a request,
// what its own Folds wrote (foldMemo), or else the entities its listings had (each
// receipt's set, matched by its digest) and their columns in the Cache at the ETags the
// Fold read, or their buckets' frozen points (frozen.go). A series is left out when some
// of it is not known so (a receipt no listing matches, a column no longer cached), or when two
// receipts hold one of its milliseconds (which of them the raw tables keep is the Folds'
// priorities'): its reader reads the tables.
//
// It is what lets a read cache of raw samples take in a Fold without reading what it
// moved again (package raw): a refreshed panel over thousands of series read their folded
// minutes back from the raw tables after every Fold, a request per seven series.
func (st *Table) FoldedFloats(receipts []changelog.Receipt, names []string) map[string][]tablets.Point {
	if out, ok := st.folds.memoFloats(receipts, names); ok {
		return out
	}
	row := func(col cachedColumn, d Decoded, r int, add func(string, Point)) {
		key, s := col.series.key(r), col.series.at(r)
		for i, ms := range s.Times {
			add(key, Point{MS: ms, Value: s.Values[i], Stamp: d.Stamp, Record: d.Record(r)})
		}
	}
	return folded(st, receipts, names, Version, func(col cachedColumn, d Decoded, want map[string]bool, add func(string, Point)) {
		for r := range col.series.len() {
			if want[col.series.key(r)] {
				row(col, d, r, add)
			}
		}
	}, row, func(b *frozenBucket, at []int32, names []string, add func(string, Point)) bool {
		return b.take(at, names, add)
	})
}

// FoldedHists is FoldedFloats of native histogram samples.
func (st *Table) FoldedHists(receipts []changelog.Receipt, names []string) map[string][]histenc.Sample {
	if out, ok := st.folds.memoHists(receipts, names); ok {
		return out
	}
	return folded(st, receipts, names, HistVersion, func(col cachedColumn, d Decoded, want map[string]bool, add func(string, Hist)) {
		for r, s := range col.hists {
			if want[s.Key] {
				for _, h := range s.Samples {
					add(s.Key, Hist{Sample: h, Stamp: d.Stamp, Record: d.Record(r)})
				}
			}
		}
	}, nil, nil)
}

// folded is FoldedFloats and FoldedHists: one code for both kinds, whose entities are of
// version version, and whose column's staged writes of the series want holds take passes to
// add (d: the entity's stamp and number in its write). With row (floats), the whole
// entities' records of names are found through the Table's series index, and row passes
// each to add (r: its row in the entity's pack); take then looks only at the entities the
// index does not hold.
func folded[S any, W Written[S]](st *Table, receipts []changelog.Receipt, names []string, version int,
	take func(col cachedColumn, d Decoded, want map[string]bool, add func(string, W)),
	row func(col cachedColumn, d Decoded, r int, add func(string, W)),
	fromFrozen func(b *frozenBucket, at []int32, names []string, add func(string, W)) bool) map[string][]S {
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
	var distinct []string
	for _, name := range names {
		if !want[name] {
			want[name] = true
			distinct = append(distinct, name)
			_, c := Hash(name)
			byColumn[c] = append(byColumn[c], name)
		}
	}
	viaIndex := row != nil && st.index != nil
	unknown := map[string]bool{}
	all := map[string][]W{}              // by series, the staged writes of every receipt
	times := map[string]map[int64]bool{} // by series, the milliseconds of the receipts before
	table := st.names.Staging()
	for _, set := range sets {
		written := map[string][]W{}
		add := func(key string, w W) { written[key] = append(written[key], w) }
		var packs []*seriesPack // by place in set: the whole entities left to the index
		var wholes []cachedColumn
		var decoded []Decoded
		if viaIndex {
			packs, wholes, decoded = make([]*seriesPack, len(set)), make([]cachedColumn, len(set)), make([]Decoded, len(set))
		}
		frozen := map[*frozenBucket][]int32{} // the entities of set frozen, by bucket
		for i, le := range set {
			e, ok := st.cache.entity(table, le)
			if !ok {
				if b, at, ok := st.cache.frozen.entity(table, le); ok {
					// A float entity, frozen: its points are taken from its bucket's
					// frozen points (only the floats' take-in has them).
					if version == Version {
						frozen[b] = append(frozen[b], at)
					}
					continue
				}
				return nil // not cached at the ETag the Fold read: no series is known
			}
			if e.version != version {
				continue // the other kind's samples only
			}
			stamp, seq, ok := StampOf([]byte(le.rk))
			if !ok {
				return nil
			}
			d := Decoded{Stamp: stamp, Seq: seq}
			if whole, ok := e.cols[wholeEntity]; ok {
				if viaIndex {
					wholes[i], decoded[i] = whole, d
					packs[i] = &wholes[i].series
					continue
				}
				take(whole, d, want, add)
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
				take(col, d, want, add)
			}
		}
		for b, at := range frozen {
			if fromFrozen == nil || !fromFrozen(b, at, distinct, add) {
				return nil
			}
		}
		if viaIndex {
			unindexed := st.index.eachRecord(packs, distinct, func(i, r int) { row(wholes[i], decoded[i], r, add) })
			for _, i := range unindexed {
				take(wholes[i], decoded[i], want, add)
			}
		}
		for name, ws := range written {
			seen := times[name]
			if seen == nil {
				seen = map[int64]bool{}
				times[name] = seen
			}
			for _, w := range ws {
				if ms, _, _ := w.written(); seen[ms] {
					// Also held by a receipt before: which one the raw tables keep is the
					// Folds' priorities'.
					unknown[name] = true
				}
			}
			for _, w := range ws {
				ms, _, _ := w.written()
				seen[ms] = true
			}
			all[name] = append(all[name], ws...)
		}
	}
	out := make(map[string][]S, len(want))
	for name := range want {
		if !unknown[name] {
			out[name] = LastWrites[S](all[name]) // none when none of its samples were folded
		}
	}
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
			set = append(set, listedEntity{pk: k[0], rk: k[1], etag: p.etag, first: p.first, last: p.last})
		}
	}
	for k, d := range l.departed {
		if inBuckets(k[0]) {
			set = append(set, listedEntity{pk: k[0], rk: k[1], etag: d.etag, first: d.first, last: d.last})
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
