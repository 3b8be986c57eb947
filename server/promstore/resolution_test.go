package promstore

import (
	"testing"

	"github.com/seed71701133/tablets/server/internal/resolution"
	"github.com/seed71701133/tablets/tsdb"
)

// The API's resolutions are tsdb's: the context carries them unchanged.
func TestResolutionsAreTSDBs(t *testing.T) {
	if resolution.Raw != tsdb.RawResolution || resolution.Any != tsdb.AnyResolution {
		t.Fatalf("resolution.Raw %v, Any %v; tsdb's %v, %v", resolution.Raw, resolution.Any, tsdb.RawResolution, tsdb.AnyResolution)
	}
}
