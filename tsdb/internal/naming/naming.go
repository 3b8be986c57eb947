// Package naming is the leaf of tsdb: the names of a database's tables, and the raw periods
// they are cut by. It owns no state and sends no request; every part of tsdb names its
// tables through it, so that one file says how a table is found.
//
// A database named B has:
//   - B + "m": the catalog;
//   - B + "w": the staging table;
//   - B + "q": the kept answers of queries;
//   - B + "r" + p: the raw table of the period starting at Unix second p, in decimal;
//   - B + "i" + p: that period's series index;
//   - B + "h" + p: that period's histogram table;
//   - B + "t" + step + "p" + q: the table of the tier of step seconds, of its own period q.
package naming

import (
	"strconv"
	"strings"
	"time"
)

// Names are the table names and raw periods of one database.
type Names struct {
	// Base is the database's name.
	Base string
	// Period is the span of a raw table: a whole number of seconds, epoch-aligned.
	Period time.Duration
}

// Kind is a kind of period table: the raw points, the series index or the histogram samples
// of a raw period.
type Kind int

const (
	Raw Kind = iota
	Index
	Hist
	// NumKinds is the number of kinds, for arrays indexed by Kind.
	NumKinds
)

// Catalog is the name of the catalog table.
func (n Names) Catalog() string { return n.Base + "m" }

// Staging is the name of the staging table.
func (n Names) Staging() string { return n.Base + "w" }

// Answers is the name of the table of kept answers.
func (n Names) Answers() string { return n.Base + "q" }

// RawTable is the name of the raw table of the period starting at p.
func (n Names) RawTable(p uint64) string { return n.Base + "r" + strconv.FormatUint(p, 10) }

// IndexTable is the name of the series index of the period starting at p.
func (n Names) IndexTable(p uint64) string { return n.Base + "i" + strconv.FormatUint(p, 10) }

// HistTable is the name of the histogram table of the period starting at p.
func (n Names) HistTable(p uint64) string { return n.Base + "h" + strconv.FormatUint(p, 10) }

// Table is the name of period p's table of kind k.
func (n Names) Table(k Kind, p uint64) string {
	switch k {
	case Index:
		return n.IndexTable(p)
	case Hist:
		return n.HistTable(p)
	}
	return n.RawTable(p)
}

// TierTable is the name of the table of the tier of step, of the tier period starting at p.
func (n Names) TierTable(step time.Duration, p uint64) string {
	return n.Base + "t" + strconv.FormatInt(int64(step/time.Second), 10) + "p" + strconv.FormatUint(p, 10)
}

// PeriodOf is the start, in Unix seconds, of the raw period holding t.
func (n Names) PeriodOf(t time.Time) uint64 {
	p := uint64(n.Period / time.Second)
	return uint64(t.Unix()) / p * p
}

// Start is the start of the raw period p.
func (n Names) Start(p uint64) time.Time { return time.Unix(int64(p), 0).UTC() }

// End is the end of the raw period p (the start of the next).
func (n Names) End(p uint64) time.Time { return n.Start(p).Add(n.Period) }

// RoleOf says which of a database's tables name is, by the suffix its role puts after the
// database's name (whatever that name is): "catalog", "staging", "raw", "index",
// "histograms", "tier" or "answers", and "" for a name no role gives. A table's name alone
// decides, so that what counts requests at the transport can say what they were for.
func RoleOf(name string) string {
	digits := func(s string) (rest string, ok bool) {
		t := strings.TrimRight(s, "0123456789")
		return t, len(t) < len(s)
	}
	if rest, ok := digits(name); ok {
		if rest == "" {
			return ""
		}
		switch rest[len(rest)-1] {
		case 'r':
			return "raw"
		case 'i':
			return "index"
		case 'h':
			return "histograms"
		case 'p':
			if rest, ok := digits(rest[:len(rest)-1]); ok && strings.HasSuffix(rest, "t") {
				return "tier"
			}
		}
		return ""
	}
	switch {
	case strings.HasSuffix(name, "m"):
		return "catalog"
	case strings.HasSuffix(name, "w"):
		return "staging"
	case strings.HasSuffix(name, "q"):
		return "answers"
	}
	return ""
}
