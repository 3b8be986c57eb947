package tsdb

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/entity"
)

func TestMetricPartition(t *testing.T) {
	for _, name := range []string{"up", "", "a/b", "a#b", "a?b", "a\\b", "x\x01", strings.Repeat("n", 300), "日本"} {
		pk := metricPartition(name)
		require.NoError(t, entity.ValidateKey(pk), name)
		require.True(t, pk >= labelPartitionsFrom && pk < labelPartitionsTo, pk)
	}
	require.Equal(t, "nup", metricPartition("up"))
	require.NotEqual(t, metricPartition("a/b"), metricPartition("a#b"))
}
