package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

func (a *app) labelsCommand() *cobra.Command {
	var (
		sf      storeFlags
		rf      rangeFlags
		matches []string
		format  string
	)
	cmd := &cobra.Command{
		Use:   "labels --db NAME [LABEL] [--match SELECTOR...] [--from -24h --to now]",
		Short: "List the label names of a database's series, or the values of one label",
		Long: `Without LABEL, list the label names of the labelled series of a --db database (__name__,
the metric name, among them); with LABEL, the values that label takes. Both sorted, each
once, among the series with points in the raw periods that [--from, --to) overlaps (the
series index is kept per raw period).

--match restricts them to the series that match a selector (repeat it for the union of
several, as Prometheus' match[]).

` + selectorHelp + `

Formats: table (one per line), csv (a header, name or value, then one per line), json (JSON
lines {"name":"job"} or {"value":"api"}).`,
		Example: `  tablets labels --db metrics
  tablets labels --db metrics job
  tablets labels --db metrics __name__ --from -7d
  tablets labels --db metrics instance --match 'up{job="api"}' --match 'up{job="web"}'`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf(cmd, "unexpected argument %q: at most one LABEL (use --match for selectors)", args[1])
			}
			label := ""
			if len(args) == 1 {
				label = args[0]
				if label == "" || !utf8.ValidString(label) {
					return usageErrorf(cmd, "LABEL %q is not a label name", label)
				}
			}
			if err := requireDB(cmd, &sf); err != nil {
				return err
			}
			sels, err := parseSelectorArgs(cmd, matches)
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
			ctx := cmd.Context()
			get := func(ms ...tsdb.Matcher) ([]string, error) {
				if label == "" {
					return db.LabelNames(ctx, from, to, ms...)
				}
				return db.LabelValues(ctx, label, from, to, ms...)
			}
			var found []string
			if len(sels) == 0 {
				found, err = get()
			} else {
				union := map[string]bool{}
				for _, ms := range sels {
					var vals []string
					if vals, err = get(ms...); err != nil {
						break
					}
					for _, v := range vals {
						union[v] = true
					}
				}
				found = slices.Sorted(maps.Keys(union))
			}
			if errors.Is(err, tablets.ErrInvalidMatcher) || errors.Is(err, tablets.ErrInvalidLabels) {
				return usageErrorf(cmd, "%v", err)
			}
			if err != nil {
				return err
			}
			column := "name"
			if label != "" {
				column = "value"
			}
			if err := a.printList(column, found, format); err != nil {
				return err
			}
			if len(found) == 0 && format == outTable {
				what := "no labelled series"
				if label != "" {
					what = fmt.Sprintf("no series with label %q", label)
				}
				if len(matches) > 0 {
					what += " matches " + selectorsText(matches)
				}
				fmt.Fprintf(a.stderr, "%s in [%s, %s)\n", what, fmtTime(from), fmtTime(to))
			}
			return nil
		},
	}
	addStoreFlags(cmd, &sf)
	f := cmd.Flags()
	f.StringArrayVar(&matches, "match", nil, `only the series that match this selector, such as 'up{job="api"}' (repeatable: the union)`)
	addRangeFlags(cmd, &rf, "-24h", "now")
	f.StringVar(&format, "format", outTable, "output format: table, csv or json")
	return cmd
}

// printList prints strings, one a line, in one of the output formats; column names them
// (a CSV header, a JSON key).
func (a *app) printList(column string, vals []string, format string) error {
	w := bufio.NewWriter(a.stdout)
	switch format {
	case outCSV:
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{column})
		for _, v := range vals {
			_ = cw.Write([]string{v})
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
	case outJSON:
		for _, v := range vals {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, `{"%s":%s}`+"\n", column, b)
		}
	default:
		for _, v := range vals {
			fmt.Fprintln(w, v)
		}
	}
	return w.Flush()
}
