package promqlsuite_test

import (
	"testing"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

func TestMain(m *testing.M) { azurite.Main(m) }
