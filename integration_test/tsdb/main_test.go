package tsdb

import (
	"strconv"
	"testing"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

func TestMain(m *testing.M) { azurite.Main(m) }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
