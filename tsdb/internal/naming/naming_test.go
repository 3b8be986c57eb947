package naming

import (
	"testing"
	"time"
)

// The names are part of the stored format (docs/format.md): a change here orphans tables.
func TestNames(t *testing.T) {
	n := Names{Base: "metrics", Period: 7 * 24 * time.Hour}
	for _, c := range []struct{ got, want string }{
		{n.Catalog(), "metricsm"},
		{n.Staging(), "metricsw"},
		{n.RawTable(604800), "metricsr604800"},
		{n.IndexTable(604800), "metricsi604800"},
		{n.HistTable(0), "metricsh0"},
		{n.Table(Raw, 7), "metricsr7"},
		{n.Table(Index, 7), "metricsi7"},
		{n.Table(Hist, 7), "metricsh7"},
		{n.TierTable(5*time.Minute, 1209600), "metricst300p1209600"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestPeriods(t *testing.T) {
	n := Names{Base: "m", Period: 7 * 24 * time.Hour}
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	p := n.PeriodOf(at)
	if p%604800 != 0 || n.Start(p).After(at) || !n.End(p).After(at) || n.End(p).Sub(n.Start(p)) != n.Period {
		t.Fatalf("period %d: [%v, %v) does not hold %v", p, n.Start(p), n.End(p), at)
	}
	if got := n.PeriodOf(n.End(p)); got != p+604800 {
		t.Fatalf("the period of its end is %d, want the next, %d", got, p+604800)
	}
	if got := n.PeriodOf(n.End(p).Add(-time.Nanosecond)); got != p {
		t.Fatalf("the period of just before its end is %d, want %d", got, p)
	}
}

// RoleOf reads back every name Names gives, whatever the base, digits at its end included.
func TestRoleOf(t *testing.T) {
	for _, base := range []string{"metrics", "t1", "r7", "soak0x", "ap"} {
		n := Names{Base: base, Period: 7 * 24 * time.Hour}
		for _, c := range []struct{ name, want string }{
			{n.Catalog(), "catalog"},
			{n.Staging(), "staging"},
			{n.RawTable(604800), "raw"},
			{n.IndexTable(604800), "index"},
			{n.HistTable(0), "histograms"},
			{n.TierTable(time.Hour, 1209600), "tier"},
			{n.Answers(), "answers"},
		} {
			if got := RoleOf(c.name); got != c.want {
				t.Errorf("RoleOf(%q) = %q, want %q", c.name, got, c.want)
			}
		}
	}
	for _, name := range []string{"", "Tables", "$batch", "12", "x", "p12", "tp12"} {
		if got := RoleOf(name); got != "" {
			t.Errorf("RoleOf(%q) = %q, want none", name, got)
		}
	}
}
