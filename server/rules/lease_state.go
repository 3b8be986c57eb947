package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf16"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/seed71701133/tablets/server/api"
)

// The holder of a group's lease writes, with each renewal, the state of the group's rules
// at the evaluation it records (property S of the lease, docs/format.md "Rule group
// leases"): each rule's health, last error, evaluation time and, for an alerting rule, its
// state and active alerts. The other servers read the lease at every interval anyway: they
// answer /api/v1/rules and /api/v1/alerts with the holder's state, so that every server of
// a database answers alike (a Grafana behind a round-robin front sees one set of alerts),
// at no request more.

// maxStateUnits bounds S in UTF-16 code units: a string property holds 64 KiB of UTF-16
// (32,768 units); the rest is margin.
const maxStateUnits = 32_000

// groupState is the JSON of S.
type groupState struct {
	// EvaluationTime is the evaluation's duration in seconds; LastEvaluation its start,
	// Unix milliseconds.
	EvaluationTime float64     `json:"d"`
	LastEvaluation int64       `json:"t"`
	Rules          []ruleState `json:"r"`
}

// ruleState is a rule's, in the group's order.
type ruleState struct {
	// Name is the rule's (the alert's or the recorded metric's): a reader shows the state
	// only where its rules are the holder's, name for name.
	Name           string  `json:"k"`
	Health         string  `json:"h"`
	LastError      string  `json:"x,omitempty"`
	EvaluationTime float64 `json:"d"`
	LastEvaluation int64   `json:"t"`
	// State and Alerts: of an alerting rule. Cut is how many of its alerts were left out to
	// keep S within its bound.
	State  string       `json:"s,omitempty"`
	Alerts []alertState `json:"a,omitempty"`
	Cut    int          `json:"c,omitempty"`
}

// alertState is an active alert.
type alertState struct {
	Labels      map[string]string `json:"l"`
	Annotations map[string]string `json:"n,omitempty"`
	State       string            `json:"s"`
	// ActiveAt and KeepFiringSince: Unix milliseconds (0: not keeping it firing).
	ActiveAt        int64 `json:"at"`
	KeepFiringSince int64 `json:"kf,omitempty"`
	// Value as Prometheus' API writes a sample value ("NaN", "+Inf" included).
	Value string `json:"v"`
}

// encodeState is S for the group g as its API shows it: every rule, and as many alerts as
// fit in maxStateUnits, in order (Cut counts those left out).
func encodeState(g api.RuleGroup) string {
	st := groupState{EvaluationTime: g.EvaluationTime.Seconds(), LastEvaluation: unixMilli(g.LastEvaluation)}
	var alerts [][]alertState
	for _, r := range g.Rules {
		rs := ruleState{Name: r.Name, Health: r.Health, LastError: r.LastError, EvaluationTime: r.EvaluationTime.Seconds(),
			LastEvaluation: unixMilli(r.LastEvaluation)}
		var as []alertState
		if r.Type == api.RuleAlerting {
			rs.State = r.State
			for _, a := range r.Alerts {
				as = append(as, alertState{Labels: a.Labels.Map(), Annotations: a.Annotations.Map(), State: a.State,
					ActiveAt: unixMilli(a.ActiveAt), KeepFiringSince: unixMilli(a.KeepFiringSince), Value: formatValue(a.Value)})
			}
		}
		rs.Cut = len(as)
		st.Rules = append(st.Rules, rs)
		alerts = append(alerts, as)
	}
	used := units(marshalState(st))
	for i, as := range alerts {
		for _, a := range as {
			n := units(marshalState(a)) + 1 // and a comma
			if len(st.Rules[i].Alerts) == 0 {
				n += len(`,"a":[]`)
			}
			if st.Rules[i].Cut == 1 {
				n -= len(`,"c":1`) // the count goes, or shrinks
			}
			if used+n > maxStateUnits {
				break
			}
			st.Rules[i].Alerts = append(st.Rules[i].Alerts, a)
			st.Rules[i].Cut--
			used += n
		}
	}
	s := marshalState(st)
	if units(s) > maxStateUnits { // (not expected: the sums above bound it)
		for i := range st.Rules {
			st.Rules[i].Cut += len(st.Rules[i].Alerts)
			st.Rules[i].Alerts = nil
		}
		s = marshalState(st)
	}
	return s
}

func marshalState(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // maps of strings, numbers and strings: never
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// units is the length of s in UTF-16 code units, as the service counts a string.
func units(s string) int {
	n := 0
	for _, r := range s {
		n += max(1, utf16.RuneLen(r))
	}
	return n
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func timeOf(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// decodeState reads S.
func decodeState(s string) (groupState, error) {
	var st groupState
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	if err := d.Decode(&st); err != nil {
		return groupState{}, fmt.Errorf("rules: a rule group's state: %w", err)
	}
	return st, nil
}

// withState is g (this server's view of a group it does not evaluate) with the holder's
// state st, where g's rules are the holder's name for name; else notHeld(g) and false.
func withState(g api.RuleGroup, st groupState) (api.RuleGroup, bool) {
	if len(st.Rules) != len(g.Rules) {
		return notHeld(g), false
	}
	for i, r := range g.Rules {
		if st.Rules[i].Name != r.Name {
			return notHeld(g), false
		}
	}
	g.EvaluationTime, g.LastEvaluation = seconds(st.EvaluationTime), timeOf(st.LastEvaluation)
	rs := make([]api.Rule, len(g.Rules))
	for i, r := range g.Rules {
		s := st.Rules[i]
		r.Health, r.LastError, r.EvaluationTime, r.LastEvaluation = s.Health, s.LastError, seconds(s.EvaluationTime), timeOf(s.LastEvaluation)
		r.Alerts = nil
		if r.Type == api.RuleAlerting {
			r.State = s.State
			for _, a := range s.Alerts {
				v, err := strconv.ParseFloat(a.Value, 64)
				if err != nil {
					v = math.NaN()
				}
				r.Alerts = append(r.Alerts, api.Alert{Labels: labels.FromMap(a.Labels), Annotations: labels.FromMap(a.Annotations),
					State: a.State, ActiveAt: timeOf(a.ActiveAt), KeepFiringSince: timeOf(a.KeepFiringSince), Value: v})
			}
		}
		rs[i] = r
	}
	g.Rules = rs
	return g, true
}

func seconds(s float64) time.Duration {
	if math.IsNaN(s) || s < 0 || s > 1e6 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}
