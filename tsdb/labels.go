package tsdb

import "github.com/seed71701133/tablets/tsdb/internal/labels"

// The label sets and matchers of tsdb's series are package internal/labels' (their code, the
// encoding and the series key); these are their public names.

// MetricName is the label that holds a series' metric name, as in Prometheus.
const MetricName = labels.MetricName

// MaxLabelsSize is the largest encoded label set: Azure's limit on an Edm.Binary property.
const MaxLabelsSize = labels.MaxSize

// Label is one name and value of a series' label set.
type Label = labels.Label

// Labels is a label set: sorted by Name, no duplicate or empty names, no empty values (a
// label with an empty value is the same as no label, as in Prometheus; SeriesOf drops them).
// Its methods: Get, String, Validate, MarshalBinary and UnmarshalBinary (the encoding of
// docs/format.md, "Label sets").
type Labels = labels.Labels

// LabelsFromStrings makes a label set from name, value pairs in any order; it panics on an
// odd count (a programming error), like Prometheus' labels.FromStrings. Check the result with
// Validate or SeriesOf.
func LabelsFromStrings(pairs ...string) Labels { return labels.FromStrings(pairs...) }

// Canonical returns the set SeriesOf stores for ls: a sorted copy without the labels of
// empty value, checked by Validate (an error wraps tablets.ErrInvalidLabels). Callers that
// register many sets at once can check each first: SeriesOfMany fails whole for one bad set.
func Canonical(ls Labels) (Labels, error) { return labels.Canonical(ls) }

// CompareLabels orders label sets as Prometheus' labels.Compare (and Select): label by label,
// name then value, a prefix first.
func CompareLabels(a, b Labels) int { return labels.Compare(a, b) }

// MatchType is how a Matcher compares a label's value.
type MatchType = labels.MatchType

// The match types of Prometheus' selectors.
const (
	MatchEqual     = labels.MatchEqual     // =
	MatchNotEqual  = labels.MatchNotEqual  // !=
	MatchRegexp    = labels.MatchRegexp    // =~
	MatchNotRegexp = labels.MatchNotRegexp // !~
)

// Matcher selects series by one label, with Prometheus' semantics: a series without the
// label has the value "" for it (so `a=""` matches series without a, and `a!="x"` and
// `a!~"x"` match them too). A regexp is RE2 syntax where "." also matches a newline,
// anchored at both ends: `a=~"b|c"` is `^(?s:b|c)$`.
type Matcher = labels.Matcher
