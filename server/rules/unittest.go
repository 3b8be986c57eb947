// The unit tests of rules, in the format of `promtool test rules`: this file follows
// Prometheus' cmd/promtool/unittest.go (v0.305, Apache License 2.0, The Prometheus
// Authors), which is not importable, without its JUnit, diff and debug outputs.

package rules

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v2"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
)

// TestOptions configure Test.
type TestOptions struct {
	// Run, if set, runs only the test groups whose name it matches (promtool's --run).
	Run *regexp.Regexp
}

// Test runs the unit tests of rules in files, as `promtool test rules` does: for each
// file "Unit Testing:  FILE" then "  SUCCESS" to out, or "  FAILED:" and what failed to
// errOut. Each test group loads its input_series (in the expanding notation of promqltest)
// into Prometheus' in-memory test storage, evaluates the rule files' groups with Prometheus'
// rule manager every evaluation_interval from time 0, and compares the firing alerts of
// alert_rule_test and the results of promql_expr_test with those expected. It returns
// whether every test passed.
func Test(out, errOut io.Writer, opts *TestOptions, files ...string) bool {
	var run *regexp.Regexp
	if opts != nil {
		run = opts.Run
	}
	ok := true
	for _, f := range files {
		fmt.Fprintln(out, "Unit Testing: ", f)
		if errs := unitTestFileRun(f, errOut, run); errs != nil {
			fmt.Fprintln(errOut, "  FAILED:")
			for _, e := range errs {
				fmt.Fprintln(errOut, e.Error())
				fmt.Fprintln(out)
			}
			ok = false
		} else {
			fmt.Fprintln(out, "  SUCCESS")
		}
		fmt.Fprintln(out)
	}
	return ok
}

func unitTestFileRun(filename string, errOut io.Writer, run *regexp.Regexp) []error {
	b, err := os.ReadFile(filename)
	if err != nil {
		return []error{err}
	}
	var in unitTestFile
	if err := yaml.UnmarshalStrict(b, &in); err != nil {
		return []error{err}
	}
	if err := resolveAndGlobFilepaths(filepath.Dir(filename), &in, errOut); err != nil {
		return []error{err}
	}
	if in.EvaluationInterval == 0 {
		in.EvaluationInterval = model.Duration(time.Minute)
	}
	evalInterval := time.Duration(in.EvaluationInterval)
	// Groups named in group_eval_order are evaluated first, in that order.
	groupOrderMap := make(map[string]int)
	for i, gn := range in.GroupEvalOrder {
		if _, ok := groupOrderMap[gn]; ok {
			return []error{fmt.Errorf("group name repeated in evaluation order: %s", gn)}
		}
		groupOrderMap[gn] = i
	}
	var errs []error
	for i, t := range in.Tests {
		if run != nil && !run.MatchString(t.TestGroupName) {
			continue
		}
		name := t.TestGroupName
		if name == "" {
			name = fmt.Sprintf("unnamed#%d", i)
		}
		if t.Interval == 0 {
			t.Interval = in.EvaluationInterval
		}
		errs = append(errs, t.test(evalInterval, groupOrderMap, in.FuzzyCompare, in.RuleFiles...)...)
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// unitTestFile is a unit test file.
type unitTestFile struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval,omitempty"`
	GroupEvalOrder     []string       `yaml:"group_eval_order"`
	Tests              []testGroup    `yaml:"tests"`
	FuzzyCompare       bool           `yaml:"fuzzy_compare,omitempty"`
}

// resolveAndGlobFilepaths makes the rule files relative to the test file's directory and
// expands their globs.
func resolveAndGlobFilepaths(baseDir string, utf *unitTestFile, errOut io.Writer) error {
	for i, rf := range utf.RuleFiles {
		if rf != "" && !filepath.IsAbs(rf) {
			utf.RuleFiles[i] = filepath.Join(baseDir, rf)
		}
	}
	var globbed []string
	for _, rf := range utf.RuleFiles {
		m, err := filepath.Glob(rf)
		if err != nil {
			return err
		}
		if len(m) == 0 {
			fmt.Fprintln(errOut, "  WARNING: no file match pattern", rf)
		}
		globbed = append(globbed, m...)
	}
	utf.RuleFiles = globbed
	return nil
}

// testGroup is a group of input series and the tests over them.
type testGroup struct {
	Interval        model.Duration   `yaml:"interval"`
	InputSeries     []series         `yaml:"input_series"`
	AlertRuleTests  []alertTestCase  `yaml:"alert_rule_test,omitempty"`
	PromqlExprTests []promqlTestCase `yaml:"promql_expr_test,omitempty"`
	ExternalLabels  labels.Labels    `yaml:"external_labels,omitempty"`
	ExternalURL     string           `yaml:"external_url,omitempty"`
	TestGroupName   string           `yaml:"name,omitempty"`
}

func (tg *testGroup) test(evalInterval time.Duration, groupOrderMap map[string]int, fuzzyCompare bool, ruleFiles ...string) (outErr []error) {
	suite, err := newUnitSuite(tg, evalInterval)
	if err != nil {
		return []error{err}
	}
	defer func() {
		if err := suite.engine.Close(); err != nil {
			outErr = append(outErr, err)
		}
	}()

	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:  rules.EngineQueryFunc(suite.engine, suite.storage),
		Appendable: suite.storage,
		Context:    context.Background(),
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {},
	})
	groupsMap, ers := m.LoadGroups(time.Duration(tg.Interval), tg.ExternalLabels, tg.ExternalURL, nil, false, ruleFiles...)
	if ers != nil {
		return ers
	}
	groups := orderedGroups(groupsMap, groupOrderMap)

	mint := time.Unix(0, 0).UTC()
	maxt := mint.Add(tg.maxEvalTime())

	var compareFloat64 cmp.Option = cmp.Options{}
	if fuzzyCompare {
		compareFloat64 = cmp.Comparer(func(x, y float64) bool {
			return x == y || math.Nextafter(x, math.Inf(-1)) == y || math.Nextafter(x, math.Inf(1)) == y
		})
	}

	// The alerts are checked as the rules are evaluated: the eval_times with alert tests,
	// the alert names tested at each, and the tests.
	alertEvalTimesMap := map[model.Duration]struct{}{}
	alertsInTest := make(map[model.Duration]map[string]struct{})
	alertTests := make(map[model.Duration][]alertTestCase)
	for _, alert := range tg.AlertRuleTests {
		if alert.Alertname == "" {
			var testGroupLog string
			if tg.TestGroupName != "" {
				testGroupLog = fmt.Sprintf(" (in TestGroup %s)", tg.TestGroupName)
			}
			return []error{fmt.Errorf("an item under alert_rule_test misses required attribute alertname at eval_time %v%s", alert.EvalTime, testGroupLog)}
		}
		alertEvalTimesMap[alert.EvalTime] = struct{}{}
		if _, ok := alertsInTest[alert.EvalTime]; !ok {
			alertsInTest[alert.EvalTime] = make(map[string]struct{})
		}
		alertsInTest[alert.EvalTime][alert.Alertname] = struct{}{}
		alertTests[alert.EvalTime] = append(alertTests[alert.EvalTime], alert)
	}
	alertEvalTimes := make([]model.Duration, 0, len(alertEvalTimesMap))
	for k := range alertEvalTimesMap {
		alertEvalTimes = append(alertEvalTimes, k)
	}
	sort.Slice(alertEvalTimes, func(i, j int) bool { return alertEvalTimes[i] < alertEvalTimes[j] })
	curr := 0

	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				// Restored, so that ALERTS is written from the first evaluation.
				ar.SetRestored(true)
			}
		}
	}

	var errs []error
	for ts := mint; ts.Before(maxt) || ts.Equal(maxt); ts = ts.Add(evalInterval) {
		var evalErrs []error
		suite.appendTill(ts)
		{
			for _, g := range groups {
				g.Eval(suite.ctx, ts)
				for _, r := range g.Rules() {
					if r.LastError() != nil {
						evalErrs = append(evalErrs, fmt.Errorf("    rule: %s, time: %s, err: %w",
							r.Name(), ts.Sub(time.Unix(0, 0).UTC()), r.LastError()))
					}
				}
			}
		}
		errs = append(errs, evalErrs...)
		if len(evalErrs) > 0 {
			return errs
		}

		for curr < len(alertEvalTimes) && ts.Sub(mint) <= time.Duration(alertEvalTimes[curr]) &&
			time.Duration(alertEvalTimes[curr]) < ts.Add(evalInterval).Sub(mint) {
			// eval_time in [ts, ts+evalInterval): compared with the evaluation at ts.
			t := alertEvalTimes[curr]
			presentAlerts := alertsInTest[t]
			got := make(map[string]labelsAndAnnotations)
			for _, g := range groups {
				for _, r := range g.Rules() {
					ar, ok := r.(*rules.AlertingRule)
					if !ok {
						continue
					}
					if _, ok := presentAlerts[ar.Name()]; !ok {
						continue
					}
					var alerts labelsAndAnnotations
					for _, a := range ar.ActiveAlerts() {
						if a.State == rules.StateFiring {
							alerts = append(alerts, labelAndAnnotation{Labels: a.Labels.Copy(), Annotations: a.Annotations.Copy()})
						}
					}
					got[ar.Name()] = append(got[ar.Name()], alerts...)
				}
			}
			for _, testcase := range alertTests[t] {
				gotAlerts := got[testcase.Alertname]
				var expAlerts labelsAndAnnotations
				for _, a := range testcase.ExpAlerts {
					// The rule's labels, which do not include the alert's name.
					if a.ExpLabels == nil {
						a.ExpLabels = make(map[string]string)
					}
					a.ExpLabels[labels.AlertName] = testcase.Alertname
					expAlerts = append(expAlerts, labelAndAnnotation{
						Labels:      labels.FromMap(a.ExpLabels),
						Annotations: labels.FromMap(a.ExpAnnotations),
					})
				}
				sort.Sort(gotAlerts)
				sort.Sort(expAlerts)
				if !cmp.Equal(expAlerts, gotAlerts, cmp.Comparer(labels.Equal), compareFloat64) {
					var testName string
					if tg.TestGroupName != "" {
						testName = fmt.Sprintf("    name: %s,\n", tg.TestGroupName)
					}
					errs = append(errs, fmt.Errorf("%s    alertname: %s, time: %s, \n        exp:%v, \n        got:%v",
						testName, testcase.Alertname, testcase.EvalTime.String(),
						indentLines(expAlerts.String(), "            "), indentLines(gotAlerts.String(), "            ")))
				}
			}
			curr++
		}
	}

Outer:
	for _, testCase := range tg.PromqlExprTests {
		got, err := query(suite.ctx, testCase.Expr, mint.Add(time.Duration(testCase.EvalTime)), suite.engine, suite.storage)
		if err != nil {
			errs = append(errs, fmt.Errorf("    expr: %q, time: %s, err: %s", testCase.Expr, testCase.EvalTime.String(), err.Error()))
			continue
		}
		var gotSamples []parsedSample
		for _, s := range got {
			gotSamples = append(gotSamples, parsedSample{Labels: s.Metric.Copy(), Value: s.F, Histogram: histogramTestExpression(s.H)})
		}
		var expSamples []parsedSample
		for _, s := range testCase.ExpSamples {
			lb, err := parser.ParseMetric(s.Labels)
			var hist *histogram.FloatHistogram
			if err == nil && s.Histogram != "" {
				_, values, parseErr := parser.ParseSeriesDesc("{} " + s.Histogram)
				switch {
				case parseErr != nil:
					err = parseErr
				case len(values) != 1:
					err = fmt.Errorf("expected 1 value, got %d", len(values))
				case values[0].Histogram == nil:
					err = fmt.Errorf("expected histogram, got %v", values[0])
				default:
					hist = values[0].Histogram
				}
			}
			if err != nil {
				err = fmt.Errorf("labels %q: %w", s.Labels, err)
				errs = append(errs, fmt.Errorf("    expr: %q, time: %s, err: %w", testCase.Expr, testCase.EvalTime.String(), err))
				continue Outer
			}
			expSamples = append(expSamples, parsedSample{Labels: lb, Value: s.Value, Histogram: histogramTestExpression(hist)})
		}
		sort.Slice(expSamples, func(i, j int) bool { return labels.Compare(expSamples[i].Labels, expSamples[j].Labels) <= 0 })
		sort.Slice(gotSamples, func(i, j int) bool { return labels.Compare(gotSamples[i].Labels, gotSamples[j].Labels) <= 0 })
		if !cmp.Equal(expSamples, gotSamples, cmp.Comparer(labels.Equal), compareFloat64) {
			errs = append(errs, fmt.Errorf("    expr: %q, time: %s,\n        exp: %v\n        got: %v", testCase.Expr,
				testCase.EvalTime.String(), parsedSamplesString(expSamples), parsedSamplesString(gotSamples)))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// unitSuite is promqltest's LazyLoader as promtool uses it: the input series, parsed
// in the expanding notation (parser.ParseSeriesDesc), appended to the storage up to each
// evaluation time; and an engine of the loader's options.
type unitSuite struct {
	storage *memStorage
	engine  *promql.Engine
	ctx     context.Context
	defs    []inputSeries
}

type inputSeries struct {
	lset    labels.Labels
	samples []memSample // not yet appended, in time order
}

func newUnitSuite(tg *testGroup, evalInterval time.Duration) (*unitSuite, error) {
	step := time.Duration(tg.Interval)
	byHash := map[uint64]int{}
	var defs []inputSeries
	for i, is := range tg.InputSeries {
		metric, vals, err := parser.ParseSeriesDesc(is.Series + " " + is.Values)
		if err != nil {
			parser.EnrichParseError(err, func(e *parser.ParseErr) { e.LineOffset = i + 1 })
			return nil, err
		}
		var samples []memSample
		for j, v := range vals {
			if v.Omitted {
				continue
			}
			t := (time.Duration(j) * step).Milliseconds()
			if v.Histogram != nil {
				samples = append(samples, memSample{t: t, fh: v.Histogram})
			} else {
				samples = append(samples, memSample{t: t, f: v.Value})
			}
		}
		// A series defined twice: the last definition, as the loader's.
		if k, ok := byHash[metric.Hash()]; ok {
			defs[k].samples = samples
			continue
		}
		byHash[metric.Hash()] = len(defs)
		defs = append(defs, inputSeries{lset: metric, samples: samples})
	}
	subquery := evalInterval.Milliseconds()
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples:               10000,
		Timeout:                  100 * time.Second,
		NoStepSubqueryIntervalFn: func(int64) int64 { return subquery },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
	})
	return &unitSuite{storage: newMemStorage(), engine: engine, ctx: context.Background(), defs: defs}, nil
}

// appendTill appends the input samples at or before ts.
func (u *unitSuite) appendTill(ts time.Time) {
	till := ts.Sub(time.Unix(0, 0).UTC()).Milliseconds()
	for i := range u.defs {
		d := &u.defs[i]
		n := 0
		for n < len(d.samples) && d.samples[n].t <= till {
			u.storage.add(d.lset, d.samples[n])
			n++
		}
		d.samples = d.samples[n:]
	}
}

func histogramTestExpression(h *histogram.FloatHistogram) string {
	if h != nil {
		return h.TestExpression()
	}
	return ""
}

// orderedGroups orders the groups by group_eval_order (a partial order).
func orderedGroups(groupsMap map[string]*rules.Group, groupOrderMap map[string]int) []*rules.Group {
	groups := make([]*rules.Group, 0, len(groupsMap))
	for _, g := range groupsMap {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool { return groupOrderMap[groups[i].Name()] < groupOrderMap[groups[j].Name()] })
	return groups
}

// maxEvalTime is the latest eval_time of the group's tests.
func (tg *testGroup) maxEvalTime() time.Duration {
	var maxd model.Duration
	for _, alert := range tg.AlertRuleTests {
		maxd = max(maxd, alert.EvalTime)
	}
	for _, pet := range tg.PromqlExprTests {
		maxd = max(maxd, pet.EvalTime)
	}
	return time.Duration(maxd)
}

func query(ctx context.Context, qs string, t time.Time, engine *promql.Engine, qu storage.Queryable) (promql.Vector, error) {
	return rules.EngineQueryFunc(engine, qu)(ctx, qs, t)
}

// indentLines prefixes each line of lines but the first with indent.
func indentLines(lines, indent string) string {
	var sb strings.Builder
	n := strings.Split(lines, "\n")
	for i, l := range n {
		if i > 0 {
			sb.WriteString(indent)
		}
		sb.WriteString(l)
		if i != len(n)-1 {
			sb.WriteRune('\n')
		}
	}
	return sb.String()
}

type labelsAndAnnotations []labelAndAnnotation

func (la labelsAndAnnotations) Len() int      { return len(la) }
func (la labelsAndAnnotations) Swap(i, j int) { la[i], la[j] = la[j], la[i] }
func (la labelsAndAnnotations) Less(i, j int) bool {
	if diff := labels.Compare(la[i].Labels, la[j].Labels); diff != 0 {
		return diff < 0
	}
	return labels.Compare(la[i].Annotations, la[j].Annotations) < 0
}

func (la labelsAndAnnotations) String() string {
	if len(la) == 0 {
		return "[]"
	}
	s := "[\n0:" + indentLines("\n"+la[0].String(), "  ")
	for i, l := range la[1:] {
		s += ",\n" + strconv.Itoa(i+1) + ":" + indentLines("\n"+l.String(), "  ")
	}
	return s + "\n]"
}

type labelAndAnnotation struct {
	Labels      labels.Labels
	Annotations labels.Labels
}

func (la *labelAndAnnotation) String() string {
	return "Labels:" + la.Labels.String() + "\nAnnotations:" + la.Annotations.String()
}

type series struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertTestCase struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []alert        `yaml:"exp_alerts"`
}

type alert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

type promqlTestCase struct {
	Expr       string         `yaml:"expr"`
	EvalTime   model.Duration `yaml:"eval_time"`
	ExpSamples []sample       `yaml:"exp_samples"`
}

type sample struct {
	Labels    string  `yaml:"labels"`
	Value     float64 `yaml:"value"`
	Histogram string  `yaml:"histogram"` // when set, Value is ignored
}

type parsedSample struct {
	Labels    labels.Labels
	Value     float64
	Histogram string // promqltest.HistogramTestExpression of the histogram
}

func parsedSamplesString(pss []parsedSample) string {
	if len(pss) == 0 {
		return "nil"
	}
	s := pss[0].String()
	for _, ps := range pss[1:] {
		s += ", " + ps.String()
	}
	return s
}

func (ps *parsedSample) String() string {
	if ps.Histogram != "" {
		return ps.Labels.String() + " " + ps.Histogram
	}
	return ps.Labels.String() + " " + strconv.FormatFloat(ps.Value, 'E', -1, 64)
}
