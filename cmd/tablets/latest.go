package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) latestCommand() *cobra.Command {
	var (
		sf     storeFlags
		series string
		n      int
		format string
	)
	cmd := &cobra.Command{
		Use:   "latest --table T --series S [-n 10]",
		Short: "Print the newest points of a series, newest first",
		Example: `  tablets latest --table metrics --series cpu
  tablets latest --table metrics --series cpu -n 1 --format json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if series == "" {
				return usageErrorf(cmd, "--series is required")
			}
			if n < 1 {
				return usageErrorf(cmd, "-n must be at least 1")
			}
			if err := checkOutFormat(format); err != nil {
				return usageErrorf(cmd, "%v", err)
			}
			store, _, err := sf.open(cmd, a)
			if err != nil {
				return err
			}
			pts, err := store.Latest(cmd.Context(), series, n)
			if err != nil {
				return err
			}
			pw := newPointWriter(a.stdout, format, []string{series})
			for _, p := range pts {
				if err := pw.write(series, p); err != nil {
					return err
				}
			}
			if len(pts) == 0 && format == outTable {
				fmt.Fprintf(a.stderr, "series %q has no points\n", series)
			}
			return pw.flush(true)
		},
	}
	addStoreFlags(cmd, &sf)
	f := cmd.Flags()
	f.StringVar(&series, "series", "", "series name (required)")
	f.IntVarP(&n, "n", "n", 10, "number of points")
	f.StringVar(&format, "format", outTable, "output format: table, csv or json")
	return cmd
}

func (a *app) deleteCommand() *cobra.Command {
	var (
		sf     storeFlags
		rf     rangeFlags
		series []string
	)
	cmd := &cobra.Command{
		Use:   "delete --table T --series S[,S2...] --from F --to T",
		Short: "Delete the points of series in a time range",
		Long: `Delete the points of one or more series with --from <= time < --to. Both ends are
required (there is no default range for a delete). Points already gone are no error.`,
		Example: `  tablets delete --table metrics --series cpu --from 2024-05-01 --to 2024-05-02
  tablets delete --table metrics --series cpu --from -1h --to now`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			names, err := seriesList(cmd, series)
			if err != nil {
				return err
			}
			from, to, err := rf.parse(cmd, a.now)
			if err != nil {
				return err
			}
			store, _, err := sf.open(cmd, a)
			if err != nil {
				return err
			}
			for _, s := range names {
				if err := store.Delete(cmd.Context(), s, from, to); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "deleted the points of series %q in [%s, %s)\n", s, fmtTime(from), fmtTime(to))
			}
			return nil
		},
	}
	addStoreFlags(cmd, &sf)
	cmd.Flags().StringSliceVar(&series, "series", nil, "series names, comma-separated or repeated (required)")
	addRangeFlags(cmd, &rf, "", "")
	return cmd
}
