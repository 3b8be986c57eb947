package server

import (
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// goCollector is the Go runtime's collector with the memstats Prometheus serves, and the
// heap the last garbage collection found live (go_gc_heap_live_bytes): the RSS and the
// memstats also hold what the collector has not yet freed or returned, so only the live
// heap tells a leak from a burst (docs/soak.md).
func goCollector() prometheus.Collector {
	return collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}))
}
