package rules

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
	"github.com/seed71701133/tablets/server/api"
)

// The lease entity of docs/format.md ("Rule group leases").
func TestFormatDocRuleLease(t *testing.T) {
	file, name := "/etc/tablets/rules/api.yml", "api"
	rec := leaseRecord{Holder: "web-1-4242-9e3779b9", Length: LeaseLength(DefaultLeaseMin, time.Minute),
		Last: time.Date(2024, 5, 23, 0, 5, 30, 123e6, time.UTC).UnixMilli(), File: file, Name: name}
	body := appendLease(LeaseRowKey(file, name), rec)
	require.Equal(t, string(formatdoc.JSON(t, "rule-lease")), string(body))
	got, err := decodeLease(body)
	require.NoError(t, err)
	require.Equal(t, rec, got)
}

// What the service answers: the Timestamp, annotations, the ETag in the body.
func TestDecodeLease(t *testing.T) {
	got, err := decodeLease([]byte(`{"odata.etag":"W/\"datetime'2024-05-23T00%3A05%3A30.2Z'\"","PartitionKey":"rulelease",` +
		`"RowKey":"6101bb6157ab7a3b3e7ac7efc266fcc3","Timestamp":"2024-05-23T00:05:30.2000000Z","Timestamp@odata.type":"Edm.DateTime",` +
		`"V":1,"H":"","L":30000,"T":0,"F":"f","N":"n","X":"later"}`))
	require.NoError(t, err)
	require.Equal(t, leaseRecord{Length: 30 * time.Second, File: "f", Name: "n",
		Written: time.Date(2024, 5, 23, 0, 5, 30, 2e8, time.UTC)}, got)
	for _, bad := range []string{
		``, `[]`, `{}`,
		`{"V":2,"H":"a","L":1000,"T":0,"F":"f","N":"n"}`,
		`{"V":"1","H":"a","L":1000,"T":0,"F":"f","N":"n"}`,
		`{"V":1,"H":1,"L":1000,"T":0,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":0,"T":0,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":1000.5,"T":0,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":31622400001,"T":0,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":1000,"T":-1,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":1000,"T":"NaN","F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":1000,"T":1e300,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":1000,"T":0,"N":"n"}`,
		`{"V":1,"H":"a","L":1000,"T":0,"F":"f","N":"n","Timestamp":"yesterday"}`,
	} {
		_, err := decodeLease([]byte(bad))
		require.ErrorIs(t, err, ErrBadLease, bad)
	}
}

// F and N are cut at 1,024 bytes, at a character; the RowKey hashes the whole.
func TestLeaseTextCut(t *testing.T) {
	long := strings.Repeat("é", 600) // 1,200 bytes
	rec, err := decodeLease(appendLease(LeaseRowKey(long, "n"), leaseRecord{Length: time.Second, File: long, Name: "n\xff"}))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("é", 512), rec.File)
	require.Equal(t, "n\uFFFD", rec.Name)
	require.NotEqual(t, LeaseRowKey(long, "n"), LeaseRowKey(rec.File, "n"))
	require.NotEqual(t, LeaseRowKey("ab", "c"), LeaseRowKey("a", "bc"))
}

func FuzzDecodeLease(f *testing.F) {
	f.Add(appendLease("k", leaseRecord{Holder: "h", Length: time.Minute, Last: 1716422730123, File: "f", Name: "n"}))
	f.Add([]byte(`{"Timestamp":"2024-05-23T00:05:30.2000000Z","V":1,"H":"","L":30000,"T":0,"F":"f","N":"n"}`))
	g := stateGroup()
	f.Add(appendLease("k", leaseRecord{Holder: "h", Length: time.Minute, File: g.File, Name: g.Name, State: encodeState(g)}))
	f.Add([]byte(`{"V":1,"H":"","L":30000,"T":0,"F":"f","N":"n","S":"{\"r\":[{\"k\":\"a\",\"a\":[{\"l\":null,\"v\":\"x\",\"at\":-1}]}]}"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeLease(b)
		if err != nil {
			return
		}
		if st, err := decodeState(rec.State); err == nil {
			// Shown over a view whose rules are the state's, whatever it holds.
			view := api.RuleGroup{}
			for _, r := range st.Rules {
				view.Rules = append(view.Rules, api.Rule{Type: api.RuleAlerting, Name: r.Name})
			}
			shown, ok := withState(view, st)
			require.True(t, ok)
			require.Len(t, shown.Rules, len(st.Rules))
		}
		again, err := decodeLease(appendLease(LeaseRowKey(rec.File, rec.Name), rec))
		require.NoError(t, err)
		rec.Written = time.Time{}
		if len(rec.File) <= leaseTextMax && len(rec.Name) <= leaseTextMax {
			// Strings of valid UTF-8 within the bound come back as they were.
			require.Equal(t, rec.Holder, again.Holder)
			require.Equal(t, rec.Length, again.Length)
			require.Equal(t, rec.Last, again.Last)
		}
		require.LessOrEqual(t, len(again.File), leaseTextMax)
	})
}

// stateGroup is the group of docs/format.md's lease with a state: a recording rule and an
// alerting rule with one firing alert.
func stateGroup() api.RuleGroup {
	at := time.Date(2024, 5, 23, 0, 5, 30, 123e6, time.UTC)
	return api.RuleGroup{Name: "api", File: "/etc/tablets/rules/api.yml", Interval: time.Minute, EvaluationTime: 12 * time.Millisecond,
		LastEvaluation: at, Rules: []api.Rule{
			{Type: api.RuleRecording, Name: "job:errors:rate5m", Query: "sum by (job) (rate(errors_total[5m]))", Health: "ok",
				EvaluationTime: 5 * time.Millisecond, LastEvaluation: at},
			{Type: api.RuleAlerting, Name: "HighErrors", Query: "job:errors:rate5m > 1", Health: "ok", EvaluationTime: 6 * time.Millisecond,
				LastEvaluation: at.Add(5 * time.Millisecond), State: "firing", Alerts: []api.Alert{{
					Labels:      labels.FromStrings("alertname", "HighErrors", "job", "api", "severity", "page"),
					Annotations: labels.FromStrings("summary", "api: 2.5 errors/s"), State: "firing",
					ActiveAt: at.Add(-10 * time.Minute), Value: 2.5}}},
		}}
}

// The lease with the holder's state (S), as docs/format.md shows it; another server reads
// it back as the holder's API showed the group (to the millisecond).
func TestFormatDocRuleLeaseState(t *testing.T) {
	g := stateGroup()
	rec := leaseRecord{Holder: "web-1-4242-9e3779b9", Length: 2 * time.Minute, Last: g.LastEvaluation.UnixMilli(), File: g.File, Name: g.Name,
		State: encodeState(g)}
	body := appendLease(LeaseRowKey(g.File, g.Name), rec)
	require.Equal(t, string(formatdoc.JSON(t, "rule-lease-state")), string(body))
	got, err := decodeLease(body)
	require.NoError(t, err)
	require.Equal(t, rec, got)
	st, err := decodeState(got.State)
	require.NoError(t, err)
	// The other server's view of the group: rules as configured, nothing evaluated.
	view := g
	view.EvaluationTime, view.LastEvaluation = 0, time.Time{}
	view.Rules = []api.Rule{g.Rules[0], g.Rules[1]}
	view.Rules[0].Health, view.Rules[1].Health, view.Rules[1].State, view.Rules[1].Alerts = "unknown", "unknown", "inactive", nil
	shown, ok := withState(view, st)
	require.True(t, ok)
	require.Equal(t, g, shown)

	// Rules that are not the holder's (another version of the file): not shown as its.
	view.Rules[1].Name = "Other"
	shown, ok = withState(view, st)
	require.False(t, ok)
	require.Empty(t, shown.Rules[1].Alerts)
	require.Equal(t, "unknown", shown.Rules[0].Health)
}

// S stays within a string property's 64 KiB of UTF-16 whatever the alerts: those that do
// not fit are counted, not written; characters outside the BMP count twice.
func TestLeaseStateBound(t *testing.T) {
	g := stateGroup()
	many := make([]api.Alert, 3000)
	for i := range many {
		many[i] = api.Alert{Labels: labels.FromStrings("alertname", "HighErrors", "instance", fmt.Sprintf("host-%04d-😀😀😀", i)),
			Annotations: labels.FromStrings("summary", strings.Repeat("é", 20)), State: "pending", ActiveAt: g.LastEvaluation, Value: math.Inf(1)}
	}
	g.Rules[1].Alerts = many
	s := encodeState(g)
	require.LessOrEqual(t, units(s), maxStateUnits)
	require.Greater(t, units(s), maxStateUnits-500, "filled up to the bound")
	require.Greater(t, len(utf16.Encode([]rune(s))), len([]rune(s)), "the emoji count twice")
	require.Equal(t, len(utf16.Encode([]rune(s))), units(s))
	st, err := decodeState(s)
	require.NoError(t, err)
	kept := len(st.Rules[1].Alerts)
	require.Positive(t, kept)
	require.Equal(t, len(many), kept+st.Rules[1].Cut)
	require.Equal(t, "+Inf", st.Rules[1].Alerts[0].Value)
	require.Equal(t, "host-0000-😀😀😀", st.Rules[1].Alerts[0].Labels["instance"])
}
