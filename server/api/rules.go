package api

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/util/annotations"
)

// Rules is what /api/v1/rules and /api/v1/alerts report: the rule groups a tenant
// evaluates, as they stand now. Package server/rules implements it over Prometheus' rule
// manager; nil in Options: the endpoints answer an empty list, as a Prometheus with no
// rules does.
type Rules interface {
	// RuleGroups returns the groups sorted by file, then name, each with its rules in
	// their order in the file.
	RuleGroups(ctx context.Context) []RuleGroup
}

// RuleGroup is a rule group and the state of its rules.
type RuleGroup struct {
	Name, File string
	Interval   time.Duration
	// Limit is the group's limit on the series a rule may produce (0: none).
	Limit int
	// EvaluationTime is how long its last evaluation took; LastEvaluation when it started
	// (zero: never).
	EvaluationTime time.Duration
	LastEvaluation time.Time
	Rules          []Rule
}

// Rule types, as Prometheus' API names them.
const (
	RuleAlerting  = "alerting"
	RuleRecording = "recording"
)

// Rule is a recording rule or an alerting rule, and its state.
type Rule struct {
	// Type is RuleAlerting or RuleRecording.
	Type string
	// Name is the alert's name, or the recorded metric's.
	Name, Query string
	// Labels are the rule's labels, as configured; Annotations an alerting rule's.
	Labels, Annotations labels.Labels
	// Health is "ok", "err" or "unknown" (never evaluated); LastError the last
	// evaluation's error, if any.
	Health, LastError string
	EvaluationTime    time.Duration
	LastEvaluation    time.Time
	// For alerting rules: State is "inactive", "pending" or "firing" (the most severe of
	// its alerts'), Duration its `for`, KeepFiringFor its keep_firing_for, Alerts its
	// active alerts.
	State         string
	Duration      time.Duration
	KeepFiringFor time.Duration
	Alerts        []Alert
}

// Alert is an active alert of an alerting rule.
type Alert struct {
	Labels, Annotations labels.Labels
	// State is "pending" or "firing".
	State string
	// ActiveAt is when the alert became pending; KeepFiringSince, if not zero, when its
	// condition ended while keep_firing_for keeps it firing.
	ActiveAt, KeepFiringSince time.Time
	// Value is its expression's value at the last evaluation.
	Value float64
}

// The JSON of Prometheus' API (web/api/v1), field for field.
type (
	ruleDiscoveryJSON struct {
		RuleGroups     []ruleGroupJSON `json:"groups"`
		GroupNextToken string          `json:"groupNextToken,omitempty"`
	}
	ruleGroupJSON struct {
		Name           string    `json:"name"`
		File           string    `json:"file"`
		Rules          []any     `json:"rules"`
		Interval       float64   `json:"interval"`
		Limit          int       `json:"limit"`
		EvaluationTime float64   `json:"evaluationTime"`
		LastEvaluation time.Time `json:"lastEvaluation"`
	}
	alertingRuleJSON struct {
		State          string        `json:"state"`
		Name           string        `json:"name"`
		Query          string        `json:"query"`
		Duration       float64       `json:"duration"`
		KeepFiringFor  float64       `json:"keepFiringFor"`
		Labels         labels.Labels `json:"labels"`
		Annotations    labels.Labels `json:"annotations"`
		Alerts         []*alertJSON  `json:"alerts"`
		Health         string        `json:"health"`
		LastError      string        `json:"lastError,omitempty"`
		EvaluationTime float64       `json:"evaluationTime"`
		LastEvaluation time.Time     `json:"lastEvaluation"`
		Type           string        `json:"type"`
	}
	recordingRuleJSON struct {
		Name           string        `json:"name"`
		Query          string        `json:"query"`
		Labels         labels.Labels `json:"labels,omitempty"`
		Health         string        `json:"health"`
		LastError      string        `json:"lastError,omitempty"`
		EvaluationTime float64       `json:"evaluationTime"`
		LastEvaluation time.Time     `json:"lastEvaluation"`
		Type           string        `json:"type"`
	}
	alertJSON struct {
		Labels          labels.Labels `json:"labels"`
		Annotations     labels.Labels `json:"annotations"`
		State           string        `json:"state"`
		ActiveAt        *time.Time    `json:"activeAt,omitempty"`
		KeepFiringSince *time.Time    `json:"keepFiringSince,omitempty"`
		Value           string        `json:"value"`
	}
)

func alertsJSON(alerts []Alert) []*alertJSON {
	out := make([]*alertJSON, len(alerts))
	for i, a := range alerts {
		out[i] = &alertJSON{
			Labels:      a.Labels,
			Annotations: a.Annotations,
			State:       a.State,
			ActiveAt:    &a.ActiveAt,
			Value:       strconv.FormatFloat(a.Value, 'e', -1, 64),
		}
		if !a.KeepFiringSince.IsZero() {
			out[i].KeepFiringSince = &a.KeepFiringSince
		}
	}
	return out
}

// /api/v1/alerts: every active alert of every alerting rule.
func (a *API) alerts(r *http.Request) ([]byte, annotations.Annotations, *apiError) {
	out := struct {
		Alerts []*alertJSON `json:"alerts"`
	}{Alerts: []*alertJSON{}}
	if a.rules != nil {
		for _, g := range a.rules.RuleGroups(r.Context()) {
			for _, rule := range g.Rules {
				if rule.Type == RuleAlerting {
					out.Alerts = append(out.Alerts, alertsJSON(rule.Alerts)...)
				}
			}
		}
	}
	return marshalData(out)
}

// /api/v1/rules: type (alert, record), rule_name[], rule_group[], file[], match[] (on the
// rules' labels), exclude_alerts, group_limit and group_next_token, as in Prometheus 3.5.
// Groups left with no rule by the filters are left out. Unlike Prometheus, which reads
// type, exclude_alerts and the page parameters from the URL only, a POST form body may
// carry them too.
func (a *API) rulesList(r *http.Request) ([]byte, annotations.Annotations, *apiError) {
	set := func(values []string) map[string]bool {
		s := make(map[string]bool, len(values))
		for _, v := range values {
			s[v] = true
		}
		return s
	}
	names, groupNames, files := set(r.Form["rule_name[]"]), set(r.Form["rule_group[]"]), set(r.Form["file[]"])
	matcherSets, err := parseMatchers(r.Form["match[]"])
	if err != nil {
		return nil, nil, badData(err)
	}
	typ := strings.ToLower(r.FormValue("type"))
	if typ != "" && typ != "alert" && typ != "record" {
		return nil, nil, invalidParam(fmt.Errorf("not supported value %q", typ), "type")
	}
	wantAlerting, wantRecording := typ == "" || typ == "alert", typ == "" || typ == "record"
	excludeAlerts := false
	if s := strings.ToLower(r.FormValue("exclude_alerts")); s != "" {
		if excludeAlerts, err = strconv.ParseBool(s); err != nil {
			return nil, nil, invalidParam(fmt.Errorf("error converting exclude_alerts: %w", err), "exclude_alerts")
		}
	}
	maxGroups, nextToken, apiErr := groupPage(r)
	if apiErr != nil {
		return nil, nil, apiErr
	}

	var groups []RuleGroup
	if a.rules != nil {
		groups = a.rules.RuleGroups(r.Context())
	}
	res := ruleDiscoveryJSON{RuleGroups: []ruleGroupJSON{}}
	foundToken := false
	for _, g := range groups {
		if maxGroups > 0 && nextToken != "" && !foundToken {
			if nextToken != groupToken(g.File, g.Name) {
				continue
			}
			foundToken = true
		}
		if (len(groupNames) > 0 && !groupNames[g.Name]) || (len(files) > 0 && !files[g.File]) {
			continue
		}
		out := ruleGroupJSON{Name: g.Name, File: g.File, Rules: []any{}, Interval: g.Interval.Seconds(), Limit: g.Limit,
			EvaluationTime: g.EvaluationTime.Seconds(), LastEvaluation: g.LastEvaluation}
		for _, rule := range g.Rules {
			if (len(names) > 0 && !names[rule.Name]) || !matchesAny(matcherSets, rule.Labels) {
				continue
			}
			switch rule.Type {
			case RuleAlerting:
				if !wantAlerting {
					continue
				}
				var active []*alertJSON
				if !excludeAlerts {
					active = alertsJSON(rule.Alerts)
				}
				out.Rules = append(out.Rules, alertingRuleJSON{State: rule.State, Name: rule.Name, Query: rule.Query,
					Duration: rule.Duration.Seconds(), KeepFiringFor: rule.KeepFiringFor.Seconds(), Labels: rule.Labels,
					Annotations: rule.Annotations, Alerts: active, Health: rule.Health, LastError: rule.LastError,
					EvaluationTime: rule.EvaluationTime.Seconds(), LastEvaluation: rule.LastEvaluation, Type: RuleAlerting})
			case RuleRecording:
				if !wantRecording {
					continue
				}
				out.Rules = append(out.Rules, recordingRuleJSON{Name: rule.Name, Query: rule.Query, Labels: rule.Labels,
					Health: rule.Health, LastError: rule.LastError, EvaluationTime: rule.EvaluationTime.Seconds(),
					LastEvaluation: rule.LastEvaluation, Type: RuleRecording})
			default:
				return nil, nil, &apiError{typ: ErrorInternal, err: fmt.Errorf("rule %q has no type %q", rule.Name, rule.Type)}
			}
		}
		if len(out.Rules) == 0 {
			continue
		}
		if maxGroups > 0 && len(res.RuleGroups) == maxGroups {
			res.GroupNextToken = groupToken(g.File, g.Name)
			break
		}
		res.RuleGroups = append(res.RuleGroups, out)
	}
	if maxGroups > 0 && nextToken != "" && !foundToken {
		return nil, nil, invalidParam(fmt.Errorf("invalid group_next_token '%v'. were rule groups changed?", nextToken), "group_next_token")
	}
	return marshalData(res)
}

// matchesAny reports whether ls matches one of the matcher sets (no set: it does), a
// matcher reading an absent label as empty, as Prometheus' rule filter does.
func matchesAny(sets [][]*labels.Matcher, ls labels.Labels) bool {
	if len(sets) == 0 {
		return true
	}
	for _, set := range sets {
		ok := true
		for _, m := range set {
			if !m.Matches(ls.Get(m.Name)) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// groupPage reads group_limit and group_next_token (0: no pagination).
func groupPage(r *http.Request) (int, string, *apiError) {
	limit, token := r.FormValue("group_limit"), r.FormValue("group_next_token")
	if token != "" && limit == "" {
		return 0, "", invalidParam(errors.New("group_limit needs to be present in order to paginate over the groups"), "group_next_token")
	}
	if limit == "" {
		return 0, "", nil
	}
	n, err := strconv.ParseInt(limit, 10, 32)
	if err != nil {
		return 0, "", invalidParam(fmt.Errorf("group_limit needs to be a valid number: %w", err), "group_limit")
	}
	if n <= 0 {
		return 0, "", invalidParam(errors.New("group_limit needs to be greater than 0"), "group_limit")
	}
	return int(n), token, nil
}

// groupToken is Prometheus' page token of a group: the SHA-1 of file;name.
func groupToken(file, group string) string {
	h := sha1.Sum([]byte(file + ";" + group))
	return hex.EncodeToString(h[:])
}

func marshalData(v any) ([]byte, annotations.Annotations, *apiError) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, &apiError{typ: ErrorInternal, err: err}
	}
	return b, nil, nil
}
