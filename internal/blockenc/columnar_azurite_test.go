package blockenc

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

func TestMain(m *testing.M) { azurite.Main(m) }

// Through the table service: a block is accepted as written, each $select reads back its
// columns (the properties it lacks come as null), and the non-sketch columns of a day of
// minutes of a counter and of a gauge cost at most 12 bytes a window in response bytes. The
// Checker fails the test on anything Azure would reject (a property over 64 KiB, an entity
// over 1 MiB).
func TestColumnarThroughService(t *testing.T) {
	client, checker := azurite.NewTable(t, nil)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(31, 32))
	// Sketches spilled over many properties, as many as an entity holds.
	wide := gaugeBlock(rng, 1440, time.Minute)
	for bins := 200; ; bins -= 10 {
		wideSketches(rng, wide, bins)
		if _, err := AppendColumnar(nil, "wide", time.Minute, wide); err == nil {
			break
		}
	}
	blocks := map[string]*Columnar{"counter": counterBlock(rng, 1440, time.Minute), "gauge": gaugeBlock(rng, 1440, time.Minute), "wide": wide}
	for series, b := range blocks {
		body, err := AppendColumnar(nil, series, time.Minute, b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.UpsertEntity(ctx, body, nil); err != nil {
			t.Fatal(err)
		}
	}
	for series, b := range blocks {
		for _, cols := range []Columns{nonSketch, ColCount, ColSum, ColFirst, ColSketch | ColHistogram, AllColumns} {
			filter, sel := "PartitionKey eq '"+series+"'", SelectColumnar(cols)
			before := checker.Stats()
			pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Select: &sel})
			var got *Columnar
			for pager.More() {
				page, err := pager.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, raw := range page.Entities {
					e := entity.Entity{AllowStrings: true, AllowNull: true}
					if err := e.Decode(raw); err != nil {
						t.Fatal(err)
					}
					if got, err = DecodeColumnar(&e, time.Minute, 0.01, cols); err != nil {
						t.Fatalf("%s, cols %b: %v", series, cols, err)
					}
				}
			}
			if got == nil {
				t.Fatalf("%s: no block read", series)
			}
			if d := columnarDiff(b, got, got.Columns); d != "" {
				t.Fatalf("%s, cols %b: %s", series, cols, d)
			}
			after := checker.Stats()
			perWindow := float64(after.ResponseBytes-before.ResponseBytes) / float64(len(b.Windows))
			t.Logf("%s, cols %08b: %d requests, %.2f response bytes a window", series, cols, after.Requests-before.Requests, perWindow)
			if cols == nonSketch && series != "wide" && perWindow > 12 {
				t.Errorf("%s: the non-sketch columns cost %.2f bytes a window", series, perWindow)
			}
		}
	}
}
