package tsdb

import (
	"fmt"
	"testing"
	"time"

	"github.com/seed71701133/tablets/entity"
)

// stagingEntities packs a commit of both kinds into entities of both versions in the same
// partition (so that they share its transactions), numbered apart under one stamp; each
// entity decodes as its version, and its pieces name every staged sample exactly once.
func TestStagingEntitiesBothKinds(t *testing.T) {
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	db := &DB{opts: Options{StagingPartitions: 1, Now: func() time.Time { return now }}, writer: 0x9e3779b9}
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
	byPartition := db.stagingEntities(plans, staged)
	if len(byPartition) != 1 {
		t.Fatalf("%d partitions, want 1", len(byPartition))
	}
	held := make([][]int, len(plans))
	versions := map[int]int{}
	rowKeys := map[string]bool{}
	for pk, es := range byPartition {
		for _, e := range es {
			versions[e.version]++
			if rowKeys[e.rowKey] {
				t.Fatalf("RowKey %s twice", e.rowKey)
			}
			rowKeys[e.rowKey] = true
			var decoded entity.Entity
			decoded.AllowStrings = true
			se, err := decodeStaged(&decoded, e.body(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if se.partitionKey != pk || se.version != e.version {
				t.Fatalf("entity %s/%s: partition %s, version %d, want %s, %d", e.partitionKey, e.rowKey, se.partitionKey, se.version, pk, e.version)
			}
			for _, p := range e.pieces {
				if want := e.version == stageHistVersion; plans[p.plan].kind.hist != want {
					t.Fatalf("a %s piece in a version %d entity", plans[p.plan].kind.noun, e.version)
				}
				held[p.plan] = append(held[p.plan], p.args...)
			}
		}
	}
	if versions[stageVersion] != 1 || versions[stageHistVersion] != 1 {
		t.Fatalf("entities by version: %v, want one of each", versions)
	}
	for i, h := range held {
		if fmt.Sprint(h) != "[0 1 2]" {
			t.Fatalf("plan %d (%s %s): pieces hold %v", i, plans[i].kind.noun, plans[i].series, h)
		}
	}
}
