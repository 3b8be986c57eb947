package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

type fakeRules []RuleGroup

func (f fakeRules) RuleGroups(context.Context) []RuleGroup { return f }

func testRuleGroups() fakeRules {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	return fakeRules{
		{Name: "a", File: "/rules/a.yml", Interval: time.Minute, EvaluationTime: 2 * time.Millisecond, LastEvaluation: at,
			Rules: []Rule{
				{Type: RuleRecording, Name: "job:up:sum", Query: "sum by (job) (up)", Labels: labels.FromStrings("team", "db"), Health: "ok"},
				{Type: RuleAlerting, Name: "Down", Query: "up == 0", Labels: labels.FromStrings("severity", "page"),
					Annotations: labels.FromStrings("summary", "{{ $labels.instance }} down"), Health: "ok", State: "firing",
					Duration: 5 * time.Minute, KeepFiringFor: time.Minute,
					Alerts: []Alert{{Labels: labels.FromStrings("alertname", "Down", "instance", "x", "severity", "page"),
						Annotations: labels.FromStrings("summary", "x down"), State: "firing", ActiveAt: at.Add(-10 * time.Minute), Value: 0}}},
			}},
		{Name: "b", File: "/rules/b.yml", Interval: 30 * time.Second, Limit: 10,
			Rules: []Rule{{Type: RuleAlerting, Name: "Slow", Query: "x > 1", Health: "err", LastError: "boom", State: "inactive"}}},
	}
}

type rulesData struct {
	Groups []struct {
		Name, File     string
		Interval       float64
		Limit          int
		EvaluationTime float64
		LastEvaluation time.Time
		Rules          []map[string]any
	}
	GroupNextToken string
}

func TestRulesEndpoint(t *testing.T) {
	_, srv := newServer(t, testStore(), &Options{Rules: testRuleGroups()})
	get := func(params url.Values) rulesData {
		t.Helper()
		var d rulesData
		require.NoError(t, json.Unmarshal(ok(t, srv, http.MethodGet, "/api/v1/rules", params).Data, &d))
		return d
	}
	names := func(d rulesData) []string {
		var out []string
		for _, g := range d.Groups {
			for _, r := range g.Rules {
				out = append(out, g.Name+"/"+r["name"].(string))
			}
		}
		return out
	}
	all := get(nil)
	require.Equal(t, []string{"a/job:up:sum", "a/Down", "b/Slow"}, names(all))
	g := all.Groups[0]
	require.Equal(t, 60.0, g.Interval)
	require.Equal(t, 0.002, g.EvaluationTime)
	rec, alert := g.Rules[0], g.Rules[1]
	require.Equal(t, map[string]any{"name": "job:up:sum", "query": "sum by (job) (up)", "labels": map[string]any{"team": "db"},
		"health": "ok", "evaluationTime": 0.0, "lastEvaluation": "0001-01-01T00:00:00Z", "type": "recording"}, rec)
	require.Equal(t, "firing", alert["state"])
	require.Equal(t, 300.0, alert["duration"])
	require.Equal(t, 60.0, alert["keepFiringFor"])
	require.Equal(t, "alerting", alert["type"])
	alerts := alert["alerts"].([]any)
	require.Len(t, alerts, 1)
	require.Equal(t, map[string]any{"labels": map[string]any{"alertname": "Down", "instance": "x", "severity": "page"},
		"annotations": map[string]any{"summary": "x down"}, "state": "firing", "activeAt": "2026-11-29T09:50:00Z", "value": "0e+00"}, alerts[0])
	require.Equal(t, "boom", all.Groups[1].Rules[0]["lastError"])
	require.Equal(t, 10, all.Groups[1].Limit)

	require.Equal(t, []string{"a/Down", "b/Slow"}, names(get(url.Values{"type": {"alert"}})))
	require.Equal(t, []string{"a/job:up:sum"}, names(get(url.Values{"type": {"record"}})))
	require.Equal(t, []string{"b/Slow"}, names(get(url.Values{"rule_group[]": {"b"}})))
	require.Equal(t, []string{"a/job:up:sum", "a/Down"}, names(get(url.Values{"file[]": {"/rules/a.yml"}})))
	require.Equal(t, []string{"a/Down", "b/Slow"}, names(get(url.Values{"rule_name[]": {"Down", "Slow"}})))
	require.Equal(t, []string{"a/Down"}, names(get(url.Values{"match[]": {`{severity="page"}`}})))
	require.Equal(t, []string{"a/job:up:sum", "a/Down"}, names(get(url.Values{"match[]": {`{team="db"}`, `{severity="page"}`}})))
	require.Empty(t, get(url.Values{"rule_name[]": {"nope"}}).Groups)
	ex := get(url.Values{"exclude_alerts": {"true"}, "type": {"alert"}})
	require.Nil(t, ex.Groups[0].Rules[0]["alerts"])

	page := get(url.Values{"group_limit": {"1"}})
	require.Equal(t, []string{"a/job:up:sum", "a/Down"}, names(page))
	require.NotEmpty(t, page.GroupNextToken)
	next := get(url.Values{"group_limit": {"1"}, "group_next_token": {page.GroupNextToken}})
	require.Equal(t, []string{"b/Slow"}, names(next))
	require.Empty(t, next.GroupNextToken)

	for _, bad := range []url.Values{{"type": {"x"}}, {"exclude_alerts": {"maybe"}}, {"group_next_token": {"x"}},
		{"group_limit": {"0"}}, {"group_limit": {"1"}, "group_next_token": {"nope"}}, {"match[]": {"{"}}} {
		code, r, _ := do(t, srv, http.MethodGet, "/api/v1/rules", bad)
		require.Equal(t, http.StatusBadRequest, code, "%v", bad)
		require.Equal(t, "bad_data", r.ErrorType)
	}
}

func TestAlertsEndpoint(t *testing.T) {
	_, srv := newServer(t, testStore(), &Options{Rules: testRuleGroups()})
	var d struct{ Alerts []map[string]any }
	require.NoError(t, json.Unmarshal(ok(t, srv, http.MethodGet, "/api/v1/alerts", nil).Data, &d))
	require.Len(t, d.Alerts, 1)
	require.Equal(t, "firing", d.Alerts[0]["state"])
	require.Equal(t, map[string]any{"summary": "x down"}, d.Alerts[0]["annotations"])
}
