package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) rollupCommand() *cobra.Command {
	var (
		sf storeFlags
		rf rangeFlags
	)
	cmd := &cobra.Command{
		Use:   "rollup --db NAME --from F --to T",
		Short: "Compute a database's rollup tiers (windows of a minute and an hour) from its raw points",
		Long: `Compute the rollup tiers of a --db database over [--from, --to) from its raw points, for
every series with points there. 'tablets query --db NAME --step 1h --agg p99' then reads the
tiers where they hold the windows (sealed: rolled up at least an hour after their end), and
the raw points elsewhere, and in the days that late writes marked dirty since their rollup
(this command clears those marks over its range; 'tablets maintain' clears them all). Safe to
run beside writers and other rollups.`,
		Example: `  tablets rollup --db metrics --from -7d --to -1h`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sf.db == "" {
				return usageErrorf(cmd, "--db is required")
			}
			from, to, err := rf.parse(cmd, a.now)
			if err != nil {
				return err
			}
			db, err := sf.openDB(cmd, a)
			if err != nil {
				return err
			}
			start := time.Now()
			if err := db.Rollup(cmd.Context(), from, to); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "rolled up [%s, %s) in %s\n", fmtTime(from), fmtTime(to), humanDuration(time.Since(start)))
			return nil
		},
	}
	addStoreFlags(cmd, &sf)
	addRangeFlags(cmd, &rf, "", "")
	return cmd
}
