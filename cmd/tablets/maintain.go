package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed71701133/tablets/internal/azurite/runner"
	"github.com/seed71701133/tablets/internal/maintain/schedule"
)

func (a *app) maintainCommand() *cobra.Command {
	var (
		sf      storeFlags
		catchUp time.Duration
		from    string
	)
	cmd := &cobra.Command{
		Use:   "maintain --db NAME [--catch-up 72h]",
		Short: "Fold, compact, roll up and retain a database once, now, as 'tablets serve' keeps doing",
		Long: `Do once, now, in order, what 'tablets serve' does on its timers to a --db database, and
print a line per step with what it did, how long it took and what it asked of the account:

  fold     move the points remote writes staged into the raw tables
  compact  merge the raw chunks written since the last compaction
  rollup   compute the tier windows sealed since the last rollup (up to an hour ago)
  flagged  compute again the windows of the days late points marked dirty
  retain   drop the tables past their retention (--raw-retention, the tiers' own)

Compaction and rollup cover from where their last run ended, 'tablets serve''s or
maintain's (the database records it), up to now: a database that was not maintained for
days is caught up. One that never was starts --catch-up ago; --from starts earlier, after a
backfill of older points (not later: no time is skipped). Safe beside running servers and other maintains. For cron, for
tests, after a backfill. A failed step ends the run (exit status 1); the steps before it
are done, and their progress recorded.`,
		Example: `  tablets maintain --db metrics
  tablets maintain --db metrics --raw-retention 720h
  tablets maintain --db metrics --from 2024-01-01   # after a backfill since then`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sf.db == "" {
				return usageErrorf(cmd, "--db is required")
			}
			if sf.table != "" {
				return usageErrorf(cmd, "--table: maintain works on a --db database")
			}
			if catchUp <= 0 {
				return usageErrorf(cmd, "--catch-up must be positive")
			}
			// The progress is kept to the millisecond: a clock on one makes what a run
			// prints what the next starts from.
			now := a.now.Truncate(time.Millisecond)
			opts := &schedule.OnceOptions{CatchUp: catchUp, Now: func() time.Time { return now }}
			if from != "" {
				t, err := parseFlagTime(from, now)
				if err != nil {
					return usageErrorf(cmd, "--from: %v", err)
				}
				if t.After(now) {
					return usageErrorf(cmd, "--from %s is in the future", fmtTime(t))
				}
				opts.From = t
			}
			ctr := &counter{next: runner.DefaultTransport()}
			sf.transport = ctr
			db, err := sf.openDB(cmd, a)
			if err != nil {
				return err
			}
			last := ctr.snapshot()
			for step, err := range schedule.Once(cmd.Context(), db, opts) {
				now := ctr.snapshot()
				if line := stepLine(step, err); line != "" {
					fmt.Fprintf(a.stdout, "%s (%s)\n", line, costLine(now.sub(last)))
				}
				last = now
				if err != nil {
					if step.Task == "" {
						return usageErrorf(cmd, "%v", err)
					}
					return fmt.Errorf("%s: %w", step.Task, err)
				}
			}
			return nil
		},
	}
	addStoreFlags(cmd, &sf)
	cmd.Flags().DurationVar(&catchUp, "catch-up", schedule.DefaultRollupCatchUp, "how far back compaction and rollup start in a database that records no run of theirs")
	cmd.Flags().StringVar(&from, "from", "", "start compaction and rollup here (after a backfill), or where their last run ended if earlier")
	return cmd
}

// stepLine is the line printed for a step of maintain (before its cost): what it did and
// how long it took. A
// step that failed prints only what it did before (a range covered in part).
func stepLine(s schedule.Step, err error) string {
	took := humanDuration(s.Took)
	switch s.Task {
	case "fold":
		switch {
		case err != nil:
			return ""
		case s.FoldBusy:
			return "fold: another process is folding: left to it, in " + took
		}
		line := fmt.Sprintf("fold: %s, %s, %s", count(s.Fold.Entities, "entity", "entities"), count(s.Fold.Points, "point", "points"),
			count(s.Fold.Series, "series", "series"))
		if !s.Fold.Through.IsZero() {
			line += " (all staged before " + fmtTime(s.Fold.Through) + ")"
		}
		return line + " in " + took
	case "compact", "rollup":
		switch {
		case s.Busy:
			return s.Task + ": another process is running it, or keeps it for its next run (a server's scheduler): left to it, in " + took
		case err != nil && s.From.Equal(s.To):
			return ""
		case err != nil:
			return fmt.Sprintf("%s: covered [%s, %s) before failing, in %s", s.Task, fmtTime(s.From), fmtTime(s.To), took)
		case s.From.Equal(s.To):
			return fmt.Sprintf("%s: nothing new since %s, in %s", s.Task, fmtTime(s.From), took)
		}
		return fmt.Sprintf("%s: covered [%s, %s) in %s", s.Task, fmtTime(s.From), fmtTime(s.To), took)
	case "flagged":
		switch {
		case err != nil:
			return ""
		case s.Busy:
			return "flagged: another process is running it: left to it, in " + took
		}
		return fmt.Sprintf("flagged: rolled up the slices of %s in %s", count(s.Flagged, "dirty marker", "dirty markers"), took)
	case "retain":
		switch {
		case s.Skipped:
			return "retain: no retention, nothing to drop"
		case len(s.Dropped) == 0 && err != nil:
			return ""
		case len(s.Dropped) == 0:
			return "retain: dropped 0 tables in " + took
		}
		return fmt.Sprintf("retain: dropped %s (%s) in %s", count(len(s.Dropped), "table", "tables"), strings.Join(s.Dropped, ", "), took)
	}
	return ""
}

// costLine is what a step asked of the account.
func costLine(c counts) string {
	return fmt.Sprintf("%s, %s sent, %s received", count(int(c.Requests), "request", "requests"), humanBytes(c.BytesSent), humanBytes(c.BytesReceived))
}

// count is "1 point", "2 points".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
