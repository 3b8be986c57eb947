package tsdb

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
)

// bigHist is a valid integer histogram of n buckets.
func bigHist(n, seed int) *tablets.Histogram {
	h := &tablets.Histogram{Schema: 3, PositiveSpans: []tablets.HistogramSpan{{Offset: -int32(n / 2), Length: uint32(n)}}}
	var abs int64
	for b := range n {
		d := int64((b*7919+seed*104729)%1000 + 1)
		abs += d
		h.PositiveBuckets = append(h.PositiveBuckets, d)
		h.Count += uint64(abs)
	}
	h.Sum = float64(h.Count) * 0.37
	return h
}

// stagingEntities packs a write of histograms into entities under Azure's limits (a column under 64 KiB,
// an entity's columns under 768 KiB, keys of one partition), keeps every sample once, and
// cuts a series too large for one record into several of disjoint times.
func TestStageHistEntitiesLimits(t *testing.T) {
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	db := &DB{opts: Options{StagingPartitions: 1, Now: func() time.Time { return now }}, writer: 0x9e3779b9}
	var plans []planned
	var staged [][]int
	want := map[string]int{}
	for s := range 2000 {
		name := fmt.Sprintf("l%032x", uint64(s)*0x9e3779b97f4a7c15) // a label set's series key
		samples := 1
		if s%100 == 0 {
			samples = 90 // a long series: several records
		}
		pl := planned{series: name, kind: histSamples}
		for i := range samples {
			at := now.Add(time.Duration(i) * time.Second)
			pl.samples = append(pl.samples, sample{t: at, h: bigHist(300, s+i)})
		}
		idx := make([]int, samples)
		for i := range idx {
			idx[i] = i
		}
		plans = append(plans, pl)
		staged = append(staged, idx)
		want[name] = samples
	}
	got := map[string]int{}
	last := map[string]uint64{}
	entities, records := 0, 0
	for pk, es := range db.stagingEntities(plans, staged) {
		for _, e := range es {
			entities++
			if e.partitionKey != pk || e.version != stageHistVersion {
				t.Fatalf("entity %s/%s in partition %s, version %d", e.partitionKey, e.rowKey, pk, e.version)
			}
			var decoded entity.Entity
			decoded.AllowStrings = true
			if err := decoded.Decode(e.body()); err != nil {
				t.Fatal(err)
			}
			se, err := decodeStaged(&decoded, e.body(), nil)
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, sp := range decoded.Strings {
				if sp.Name[0] != 'c' {
					continue
				}
				n := base64.StdEncoding.DecodedLen(len(sp.Value))
				if n > stageMaxColumn {
					t.Errorf("column %s of %d bytes", sp.Name, n)
				}
				total += n
			}
			if total > stageMaxEntity {
				t.Errorf("entity of %d column bytes", total)
			}
			for _, s := range se.hists {
				records++
				slot, _ := stageHash(s.Key)
				if lo, _ := stageSlotRange(slot, 1); pk != stagePartitionKey(floorSec(unix(now), stageBucket), lo) {
					t.Errorf("%s in partition %s", s.Key, pk)
				}
				for _, h := range s.Samples {
					if h.Unit < last[s.Key] {
						t.Errorf("%s: records overlap", s.Key)
					}
					last[s.Key] = h.Unit + 1
				}
				got[s.Key] += len(s.Samples)
			}
		}
	}
	t.Logf("2,000 series of 300-bucket histograms (20 of 90 samples): %d records in %d entities", records, entities)
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s: %d samples staged, want %d", name, got[name], n)
		}
	}
	if records <= 2000 || entities < 2 {
		t.Errorf("%d records in %d entities: the long series were not cut, or the entities not split", records, entities)
	}
}
