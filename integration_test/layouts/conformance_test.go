package layouts

import (
	"testing"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/internal/testkit/storetest"
)

func TestMain(m *testing.M) { azurite.Main(m) }

// TestCost checks what reads and writes cost, per layout with its default options.
func TestCost(t *testing.T) {
	for _, h := range itest.Stores {
		run := storetest.RunCostTests
		switch h.Name() {
		case "basic", "advanced":
		case "chunked":
			// Only Latest: a page of overlapping chunks reads whole chunks (QueryPage's cost).
			run = storetest.RunLatestCostTests
		default:
			continue
		}
		t.Run(h.Name(), func(t *testing.T) {
			t.Parallel()
			run(t, h)
		})
	}
}

func TestConformance(t *testing.T) {
	for _, h := range itest.Stores {
		t.Run(h.Name(), func(t *testing.T) {
			t.Parallel()
			storetest.RunConformanceTests(t, h)
		})
	}
}
