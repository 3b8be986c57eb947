package tsdb

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/priority"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
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

// staging.Build packs a write of histograms into entities under Azure's limits (a column under 64 KiB,
// an entity's columns under 768 KiB, keys of one partition), keeps every sample once, and
// cuts a series too large for one record into several of disjoint times.
func TestStageHistEntitiesLimits(t *testing.T) {
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
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
	for pk, es := range staging.Build(stagedWrites(plans, staged), staging.BucketOf(now), priority.Next(), 0x9e3779b9, 1) {
		for _, e := range es {
			entities++
			if e.PartitionKey != pk || e.Version != staging.HistVersion {
				t.Fatalf("entity %s/%s in partition %s, version %d", e.PartitionKey, e.RowKey, pk, e.Version)
			}
			var decoded entity.Entity
			decoded.AllowStrings = true
			if err := decoded.Decode(e.Body()); err != nil {
				t.Fatal(err)
			}
			se, err := staging.Decode(&decoded, e.Body(), nil)
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, sp := range decoded.Strings {
				if sp.Name[0] != 'c' {
					continue
				}
				n := base64.StdEncoding.DecodedLen(len(sp.Value))
				if n > staging.MaxColumn {
					t.Errorf("column %s of %d bytes", sp.Name, n)
				}
				total += n
			}
			if total > staging.MaxEntity {
				t.Errorf("entity of %d column bytes", total)
			}
			for _, s := range se.Hists {
				records++
				slot, _ := staging.Hash(s.Key)
				if lo, _ := staging.SlotRange(slot, 1); pk != staging.PartitionKey(staging.BucketOf(now), lo) {
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

// staging.Build packs a commit of both kinds into entities of both versions in the same
// partition (so that they share its transactions), numbered apart under one stamp; each
// entity decodes as its version, and its pieces name every staged sample exactly once.
func TestStagingEntitiesBothKinds(t *testing.T) {
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	var plans []planned
	var staged [][]int
	for s := range 300 {
		name := fmt.Sprintf("l%032x", uint64(s)*0x9e3779b97f4a7c15)
		for _, kind := range []*sampleKind{floatSamples, histSamples} {
			if kind == floatSamples && s >= 200 || kind == histSamples && s < 100 {
				continue
			}
			pl := planned{series: name, kind: kind}
			for i := range 3 {
				at := now.Add(time.Duration(i) * time.Second)
				if kind == floatSamples {
					pl.samples = append(pl.samples, sample{t: at, v: float64(s + i)})
				} else {
					pl.samples = append(pl.samples, sample{t: at, h: bigHist(20, s+i)})
				}
			}
			plans = append(plans, pl)
			staged = append(staged, []int{0, 1, 2})
		}
	}
	byPartition := staging.Build(stagedWrites(plans, staged), staging.BucketOf(now), priority.Next(), 0x9e3779b9, 1)
	if len(byPartition) != 1 {
		t.Fatalf("%d partitions, want 1", len(byPartition))
	}
	held := make([][]int, len(plans))
	versions := map[int]int{}
	rowKeys := map[string]bool{}
	for pk, es := range byPartition {
		for _, e := range es {
			versions[e.Version]++
			if rowKeys[e.RowKey] {
				t.Fatalf("RowKey %s twice", e.RowKey)
			}
			rowKeys[e.RowKey] = true
			var decoded entity.Entity
			decoded.AllowStrings = true
			se, err := staging.Decode(&decoded, e.Body(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if se.PartitionKey != pk || se.Version != e.Version {
				t.Fatalf("entity %s/%s: partition %s, version %d, want %s, %d", e.PartitionKey, e.RowKey, se.PartitionKey, se.Version, pk, e.Version)
			}
			for _, p := range e.Pieces {
				if want := e.Version == staging.HistVersion; plans[p.Write].kind.hist != want {
					t.Fatalf("a %s piece in a version %d entity", plans[p.Write].kind.noun, e.Version)
				}
				held[p.Write] = append(held[p.Write], p.Args...)
			}
		}
	}
	if versions[staging.Version] != 1 || versions[staging.HistVersion] != 1 {
		t.Fatalf("entities by version: %v, want one of each", versions)
	}
	for i, h := range held {
		if fmt.Sprint(h) != "[0 1 2]" {
			t.Fatalf("plan %d (%s %s): pieces hold %v", i, plans[i].kind.noun, plans[i].series, h)
		}
	}
}
