package tables

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

func testPeriods(t *testing.T) *Periods {
	t.Helper()
	// No request is sent by what these tests call: the address is never dialled.
	svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:1/devstoreaccount1", nil)
	if err != nil {
		t.Fatal(err)
	}
	names := naming.Names{Base: "db", Period: 24 * time.Hour}
	now := time.Date(2024, 5, 23, 12, 0, 0, 0, time.UTC)
	return NewPeriods(svc, names, catalog.New(svc.NewClient(names.Catalog()), 16), func() time.Time { return now })
}

// A table found by a read is known but not had (a Write still makes it); one made is both;
// one found gone is neither, and counts as vanished when it was known (not for indexes).
func TestPeriodsKnowledge(t *testing.T) {
	pt := testPeriods(t)
	pt.Found(naming.Raw, 1)
	if !pt.Known(naming.Raw, 1) || pt.Has(naming.Raw, 1) {
		t.Fatal("a table found by a read: known, not had")
	}
	pt.Made(naming.Raw, 1)
	pt.Found(naming.Raw, 1) // does not demote what was made
	if !pt.Has(naming.Raw, 1) || pt.Known(naming.Hist, 1) {
		t.Fatal("a table made is had, and only of its kind")
	}
	pt.Gone(naming.Raw, 1)
	pt.Gone(naming.Raw, 2) // never known: not vanished
	pt.Made(naming.Index, 3)
	pt.Gone(naming.Index, 3)
	if pt.Known(naming.Raw, 1) || pt.Vanished.Load() != 1 {
		t.Fatalf("after Gone: known %v, vanished %d (want false, 1)", pt.Known(naming.Raw, 1), pt.Vanished.Load())
	}
	pt.Dropped.Add(5, struct{}{})
	pt.Dropped.Add(4, struct{}{})
	if latest, ok := pt.LatestDroppedCached(); !ok || latest != 5 || !pt.KnownDropped(4) || pt.KnownDropped(6) {
		t.Fatalf("dropped: latest %d %v", latest, ok)
	}
}

// SpanOf clips a range to a period; Spans lists the periods known to have a table, clipped,
// and nothing for an empty range, without a request while the periods are known (at most
// maxProbes unknown ones are probed, not listed).
func TestSpans(t *testing.T) {
	pt := testPeriods(t)
	day := 24 * time.Hour
	start := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC)
	p := pt.names.PeriodOf(start)
	next := pt.names.PeriodOf(start.Add(day))
	sp := pt.SpanOf(p, start.Add(-time.Hour), start.Add(2*day))
	if sp.Period != p || !sp.From.Equal(start) || !sp.To.Equal(start.Add(day)) {
		t.Fatalf("SpanOf clipped to %+v", sp)
	}
	sp = pt.SpanOf(p, start.Add(time.Hour), start.Add(2*time.Hour))
	if !sp.From.Equal(start.Add(time.Hour)) || !sp.To.Equal(start.Add(2*time.Hour)) {
		t.Fatalf("SpanOf inside the period: %+v", sp)
	}
	pt.Made(naming.Raw, p)
	pt.Made(naming.Raw, next)
	spans, err := pt.Spans(context.Background(), naming.Raw, start.Add(time.Hour), start.Add(day+time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 2 || !spans[0].From.Equal(start.Add(time.Hour)) || !spans[0].To.Equal(start.Add(day)) ||
		!spans[1].From.Equal(start.Add(day)) || !spans[1].To.Equal(start.Add(day+time.Hour)) {
		t.Fatalf("spans %+v", spans)
	}
	if spans, err := pt.Spans(context.Background(), naming.Raw, start, start); err != nil || spans != nil {
		t.Fatalf("an empty range: %v, %v", spans, err)
	}
}

// OldestKnown is the oldest period of a kind this process knows a table of (made or
// found), of that kind only, and forgets one found gone; none before any is known.
func TestOldestKnown(t *testing.T) {
	p := NewPeriods(nil, naming.Names{}, nil, nil)
	if _, ok := p.OldestKnown(naming.Raw); ok {
		t.Fatal("a period known before any")
	}
	p.Found(naming.Raw, 300)
	p.Made(naming.Raw, 200)
	p.Found(naming.Hist, 100)
	if got, ok := p.OldestKnown(naming.Raw); !ok || got != 200 {
		t.Errorf("oldest raw %d, %v; want 200", got, ok)
	}
	p.Gone(naming.Raw, 200)
	if got, ok := p.OldestKnown(naming.Raw); !ok || got != 300 {
		t.Errorf("oldest raw after 200 gone: %d, %v; want 300", got, ok)
	}
}
