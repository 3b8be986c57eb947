package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed71701133/tablets/tsdb"
)

func (a *app) seriesCommand() *cobra.Command {
	var (
		sf     storeFlags
		rf     rangeFlags
		format string
	)
	cmd := &cobra.Command{
		Use:   "series --db NAME SELECTOR... [--from -24h --to now] [--format table|csv|json]",
		Short: "List the labelled series of a database that match selectors",
		Long: `List the series of a --db database that match one or more selectors (their union, as
Prometheus' match[]) and have points in the raw periods that [--from, --to) overlaps (the
series index is kept per raw period, so a series may have no point in the range itself):
each its labels, in Prometheus' format, and its series key, sorted by labels.

` + selectorHelp + `

Only series written with labels ('tablets write --labels') have labels: series written by
name (--series) are not listed.

Formats: table (aligned columns: the key, then the labels), csv (series,labels), json (JSON
lines {"series":"l...","labels":{"__name__":"up","job":"api"}}).`,
		Example: `  tablets series --db metrics 'up{job="api"}'
  tablets series --db metrics 'http_requests_total{code=~"5.."}' '{job="web"}' --from -7d
  tablets series --db metrics '{__name__=~".+"}' --format json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf(cmd, `a selector is required, such as 'up{job="api"}'`)
			}
			if err := requireDB(cmd, &sf); err != nil {
				return err
			}
			sels, err := parseSelectorArgs(cmd, args)
			if err != nil {
				return err
			}
			from, to, err := rf.parse(cmd, a.now)
			if err != nil {
				return err
			}
			if err := checkOutFormat(format); err != nil {
				return usageErrorf(cmd, "%v", err)
			}
			db, err := sf.openDB(cmd, a)
			if err != nil {
				return err
			}
			found, err := selectSeries(cmd.Context(), cmd, db, from, to, sels)
			if err != nil {
				return err
			}
			if err := a.printSeries(found, format); err != nil {
				return err
			}
			if len(found) == 0 && format == outTable {
				fmt.Fprintf(a.stderr, "no series matches %s in [%s, %s)\n", selectorsText(args), fmtTime(from), fmtTime(to))
			}
			return nil
		},
	}
	addStoreFlags(cmd, &sf)
	addRangeFlags(cmd, &rf, "-24h", "now")
	cmd.Flags().StringVar(&format, "format", outTable, "output format: table, csv or json")
	return cmd
}

// printSeries prints series and their labels in one of the output formats.
func (a *app) printSeries(found []tsdb.SeriesInfo, format string) error {
	w := bufio.NewWriter(a.stdout)
	switch format {
	case outCSV:
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"series", "labels"})
		for _, s := range found {
			_ = cw.Write([]string{s.Series, s.Labels.String()})
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
	case outJSON:
		for _, s := range found {
			key, _ := json.Marshal(s.Series)
			fmt.Fprintf(w, `{"series":%s,"labels":%s}`+"\n", key, labelsJSON(s.Labels))
		}
	default:
		if len(found) > 0 {
			width := len("SERIES")
			for _, s := range found {
				width = max(width, len(s.Series))
			}
			fmt.Fprintf(w, "%-*s  %s\n", width, "SERIES", "LABELS")
			for _, s := range found {
				fmt.Fprintf(w, "%-*s  %s\n", width, s.Series, s.Labels)
			}
		}
	}
	return w.Flush()
}

// labelsJSON is a label set as a JSON object, its labels in the set's order (by name), as
// Prometheus' API prints them.
func labelsJSON(ls tsdb.Labels) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(l.Name)
		value, _ := json.Marshal(l.Value)
		b.Write(name)
		b.WriteByte(':')
		b.Write(value)
	}
	b.WriteByte('}')
	return b.String()
}
