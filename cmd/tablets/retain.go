package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) retainCommand() *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "retain --db NAME --raw-retention D",
		Short: "Drop a database's raw tables whose whole span is older than its retention",
		Long: `Drop the raw tables of a --db database whose whole period ended --raw-retention or
more before now: one request a table (Azure Table Storage has no TTL; deleting a table is its
high-volume delete). Each is recorded as dropped first, so no later write creates it again.
Before that, the period's rollup tiers are completed from its raw points (where the rollup's
progress has not reached, and the days late writes marked dirty): the tiers then keep its
windows.`,
		Example: `  tablets retain --db metrics --raw-retention 720h`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sf.db == "" {
				return usageErrorf(cmd, "--db is required")
			}
			if sf.rawRetention <= 0 {
				return usageErrorf(cmd, "--raw-retention is required: how old a table's whole span must be to be dropped")
			}
			db, err := sf.openDB(cmd, a)
			if err != nil {
				return err
			}
			dropped, err := db.Retain(cmd.Context(), a.now)
			for _, t := range dropped {
				fmt.Fprintf(a.stdout, "dropped %s\n", t)
			}
			if err != nil {
				return err
			}
			if len(dropped) == 0 {
				fmt.Fprintln(a.stderr, "no raw table is older than the retention")
			}
			return nil
		},
	}
	addStoreFlags(cmd, &sf)
	return cmd
}
