// Package labels holds the label sets of tsdb's series and the matchers that select them:
// the sets' one encoding (docs/format.md, "Label sets"), the series key that hashes it, and
// matchers with Prometheus' semantics. Package tsdb gives them its public names (Labels,
// Matcher, ...); this package owns their code.
package labels

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/labelenc"
)

// MetricName is the label that holds a series' metric name, as in Prometheus.
const MetricName = "__name__"

// Label is one name and value of a series' label set.
type Label struct{ Name, Value string }

// Labels is a label set: sorted by Name, no duplicate or empty names, no empty values (a
// label with an empty value is the same as no label, as in Prometheus; SeriesOf drops them).
type Labels []Label

// FromStrings makes a label set from name, value pairs in any order; it panics on an
// odd count (a programming error), like Prometheus' labels.FromStrings. Check the result with
// Validate or SeriesOf.
func FromStrings(pairs ...string) Labels {
	if len(pairs)%2 != 0 {
		panic("labels.FromStrings: odd number of strings")
	}
	ls := make(Labels, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		ls = append(ls, Label{pairs[i], pairs[i+1]})
	}
	slices.SortStableFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	return ls
}

// Get returns the value of the label named name, or "" if there is none.
func (ls Labels) Get(name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// String formats the set as Prometheus does: name{a="1", b="2"}, or {a="1"} without a name.
func (ls Labels) String() string {
	var b strings.Builder
	b.WriteString(ls.Get(MetricName))
	b.WriteByte('{')
	first := true
	for _, l := range ls {
		if l.Name == MetricName {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		b.WriteString(l.Name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l.Value))
	}
	b.WriteByte('}')
	return b.String()
}

// Validate reports, wrapping tablets.ErrInvalidLabels, a set that is not sorted, has an
// empty or duplicate name, an empty value, invalid UTF-8, or encodes to more than
// MaxSize bytes.
func (ls Labels) Validate() error {
	if err := labelenc.Check(ls); err != nil {
		return fmt.Errorf("%w: %w", tablets.ErrInvalidLabels, err)
	}
	return nil
}

// Canonical returns the set SeriesOf stores for ls: a sorted copy without the labels of
// empty value, checked by Validate (an error wraps tablets.ErrInvalidLabels). Callers that
// register many sets at once can check each first: SeriesOfMany fails whole for one bad set.
func Canonical(ls Labels) (Labels, error) {
	out := make(Labels, 0, len(ls))
	for _, l := range ls {
		if l.Value != "" {
			out = append(out, l)
		}
	}
	slices.SortStableFunc(out, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	for _, l := range ls {
		if l.Name == "" {
			return nil, fmt.Errorf("%w: a label has an empty name", tablets.ErrInvalidLabels)
		}
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

// MaxSize is the largest encoded label set: Azure's limit on an Edm.Binary property.
const MaxSize = labelenc.MaxSize

// Append appends the encoding of a valid, sorted label set (docs/format.md, "Label
// sets"). A set has exactly one encoding: it is what the series key hashes.
func Append(dst []byte, ls Labels) []byte { return labelenc.Append(dst, ls) }

// ErrInvalid is wrapped by the errors of decoding bytes that are not a label set's.
var ErrInvalid = labelenc.ErrInvalid

// MarshalBinary returns the encoding of a valid set (the bytes of the index's L property and
// what the series key hashes; docs/format.md, "Label sets"), or Validate's error.
func (ls Labels) MarshalBinary() ([]byte, error) {
	if err := ls.Validate(); err != nil {
		return nil, err
	}
	return Append(nil, ls), nil
}

// UnmarshalBinary decodes MarshalBinary's encoding strictly.
func (ls *Labels) UnmarshalBinary(b []byte) error {
	out, err := Decode(b)
	if err != nil {
		return fmt.Errorf("tsdb: %w", err)
	}
	*ls = out
	return nil
}

// Decode decodes Append's encoding strictly: anything but the one encoding of a
// valid set is an error wrapping ErrInvalid.
func Decode(b []byte) (Labels, error) { return labelenc.Decode[Label](b) }

// KeyPrefix starts every series key of a label set.
const KeyPrefix = "l"

// Key is the series key of a canonical label set: "l" and the first 16 bytes of the
// SHA-256 of its encoding, in lowercase hex (33 characters, valid in every layout's keys
// whatever the labels hold). 128 bits: a collision among a trillion series has a chance
// under 1e-14.
func Key(ls Labels) string {
	sum := sha256.Sum256(Append(nil, ls))
	return KeyPrefix + hex.EncodeToString(sum[:16])
}

// IsKey reports whether series has the form of a label set's key (then the registry
// may hold its labels).
func IsKey(series string) bool {
	if len(series) != 33 || series[0] != KeyPrefix[0] {
		return false
	}
	for i := 1; i < len(series); i++ {
		if c := series[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Compare orders label sets as Prometheus' labels.Compare (and Select): label by label,
// name then value, a prefix first.
func Compare(a, b Labels) int {
	for i := range min(len(a), len(b)) {
		if c := strings.Compare(a[i].Name, b[i].Name); c != 0 {
			return c
		}
		if c := strings.Compare(a[i].Value, b[i].Value); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}
