package catalog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/entity"
)

func TestMetricPartition(t *testing.T) {
	for _, name := range []string{"up", "", "a/b", "a#b", "a?b", "a\\b", "x\x01", strings.Repeat("n", 300), "日本"} {
		pk := MetricPartition(name)
		require.NoError(t, entity.ValidateKey(pk), name)
		require.True(t, pk >= LabelPartitionsFrom && pk < LabelPartitionsTo, pk)
	}
	require.Equal(t, "nup", MetricPartition("up"))
	require.NotEqual(t, MetricPartition("a/b"), MetricPartition("a#b"))
}
