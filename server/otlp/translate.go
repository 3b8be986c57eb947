package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/prompb"
	prw "github.com/prometheus/prometheus/storage/remote/otlptranslator/prometheusremotewrite"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// maxProblems bounds the problems an answer lists.
const maxProblems = 10

// settings are those Prometheus 3's OTLP endpoint derives from its default configuration
// (storage/remote's rwExporter with config.DefaultOTLPConfig), NHCB as configured.
func settings(nhcb bool) prw.Settings {
	c := config.DefaultOTLPConfig
	c.ConvertHistogramsToNHCB = nhcb
	return prw.Settings{
		AddMetricSuffixes:                 c.TranslationStrategy != config.NoTranslation,
		AllowUTF8:                         c.TranslationStrategy != config.UnderscoreEscapingWithSuffixes,
		PromoteResourceAttributes:         prw.NewPromoteResourceAttributes(c),
		KeepIdentifyingResourceAttributes: c.KeepIdentifyingResourceAttributes,
		ConvertHistogramsToNHCB:           c.ConvertHistogramsToNHCB,
	}
}

// translate checks md and converts it to remote-write time series, before anything is
// stored: a metric it cannot translate refuses the whole request (400), naming it. It
// drops exemplars (not stored) and metrics without points (a warning each); md is
// modified.
func translate(ctx context.Context, md pmetric.Metrics, nhcb bool) ([]prompb.TimeSeries, []string, *httpError) {
	problems, warnings := check(md)
	if len(problems) > 0 {
		return nil, nil, errorf(http.StatusBadRequest, "%s", list(problems))
	}
	conv := prw.NewPrometheusConverter()
	annots, err := conv.FromMetrics(ctx, md, settings(nhcb))
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, errorf(http.StatusServiceUnavailable, "translating: %v", err)
		}
		return nil, nil, errorf(http.StatusBadRequest, "translating: %v", err)
	}
	translated, _ := annots.AsStrings("", maxProblems, 0)
	return conv.TimeSeries(), append(warnings, translated...), nil
}

// check finds what Prometheus' translator refuses (and a number point without a value,
// which it would store as 0), naming each metric, and removes what is not stored.
func check(md pmetric.Metrics) (problems, warnings []string) {
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			sms.At(j).Metrics().RemoveIf(func(m pmetric.Metric) bool {
				if dataPoints(m) == 0 && m.Type() != pmetric.MetricTypeEmpty {
					warnings = append(warnings, fmt.Sprintf("metric %q has no data points", m.Name()))
					return true
				}
				if p := checkMetric(m); p != "" {
					problems = append(problems, p)
				}
				dropExemplars(m)
				return false
			})
		}
	}
	return problems, warnings
}

// checkMetric returns what makes m untranslatable ("" if nothing).
func checkMetric(m pmetric.Metric) string {
	var temporality pmetric.AggregationTemporality
	switch m.Type() {
	case pmetric.MetricTypeEmpty:
		return fmt.Sprintf("metric %q has no data type", m.Name())
	case pmetric.MetricTypeGauge:
		return checkNumbers(m, m.Gauge().DataPoints())
	case pmetric.MetricTypeSummary:
		return ""
	case pmetric.MetricTypeSum:
		temporality = m.Sum().AggregationTemporality()
	case pmetric.MetricTypeHistogram:
		temporality = m.Histogram().AggregationTemporality()
	case pmetric.MetricTypeExponentialHistogram:
		temporality = m.ExponentialHistogram().AggregationTemporality()
	}
	if temporality != pmetric.AggregationTemporalityCumulative {
		return fmt.Sprintf("metric %q has %s temporality: only cumulative metrics are stored, as by Prometheus (set the exporter's temporality to cumulative)",
			m.Name(), strings.ToLower(temporality.String()))
	}
	switch m.Type() {
	case pmetric.MetricTypeSum:
		return checkNumbers(m, m.Sum().DataPoints())
	case pmetric.MetricTypeExponentialHistogram:
		points := m.ExponentialHistogram().DataPoints()
		for k := range points.Len() {
			if scale := points.At(k).Scale(); scale < -4 {
				return fmt.Sprintf("metric %q: exponential histogram scale %d is below the least native histogram schema, -4", m.Name(), scale)
			}
		}
	}
	return ""
}

// checkNumbers refuses a number point without a value (unless flagged "no recorded value":
// a staleness marker).
func checkNumbers(m pmetric.Metric, points pmetric.NumberDataPointSlice) string {
	for k := range points.Len() {
		p := points.At(k)
		if p.ValueType() == pmetric.NumberDataPointValueTypeEmpty && !p.Flags().NoRecordedValue() {
			return fmt.Sprintf("metric %q: a data point has no value", m.Name())
		}
	}
	return ""
}

// dataPoints counts m's points.
func dataPoints(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

// dropExemplars removes m's exemplars: the write path does not store them, and the
// translator refuses a metric for an exemplar without a value.
func dropExemplars(m pmetric.Metric) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		points := m.Gauge().DataPoints()
		for k := range points.Len() {
			points.At(k).Exemplars().RemoveIf(func(pmetric.Exemplar) bool { return true })
		}
	case pmetric.MetricTypeSum:
		points := m.Sum().DataPoints()
		for k := range points.Len() {
			points.At(k).Exemplars().RemoveIf(func(pmetric.Exemplar) bool { return true })
		}
	case pmetric.MetricTypeHistogram:
		points := m.Histogram().DataPoints()
		for k := range points.Len() {
			points.At(k).Exemplars().RemoveIf(func(pmetric.Exemplar) bool { return true })
		}
	case pmetric.MetricTypeExponentialHistogram:
		points := m.ExponentialHistogram().DataPoints()
		for k := range points.Len() {
			points.At(k).Exemplars().RemoveIf(func(pmetric.Exemplar) bool { return true })
		}
	}
}

// list joins problems, at most maxProblems of them.
func list(problems []string) string {
	if len(problems) <= maxProblems {
		return strings.Join(problems, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(problems[:maxProblems], "; "), len(problems)-maxProblems)
}
