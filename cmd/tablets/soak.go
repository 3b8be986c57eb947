package main

import (
	"errors"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/soak"
)

// errSoakFailed is the error of a soak that ran but missed a target.
var errSoakFailed = errors.New("soak: a target failed (see the report)")

func (a *app) soakCommand() *cobra.Command {
	var (
		cfg        soak.Config
		report     string
		connString string
	)
	cmd := &cobra.Command{
		Use:   "soak [--duration 30m] [--tenants 4] [--rate 5000] [--outage-at 15m --outage 60s] [--servers 1] [--report FILE]",
		Short: "Soak 'tablets serve': tenants writing and querying for a while, an account outage, then check everything",
		Long: `Run 'tablets serve' (this executable) as a subprocess in front of a local Azurite (or the
--connection-string's account, over plain http), reached through a proxy that cuts the
account off for --outage at --outage-at, as a real outage does (connections refused and
closed). Meanwhile --tenants tenants (X-Scope-OrgID soak0, soak1, ...) remote-write --rate
samples/s in all, as Prometheus does (requests of up to 2,000 samples, each series every
15s, 5xx and 429 retried with back-off), and each refreshes a dashboard of 20 panels
(rate, sum by, histogram_quantile over 1h and 7d) every 10s. The server's RSS, goroutines
and account requests are sampled every 10s. At the end every tenant's series (or --verify of
them: on Azurite a read-back of many series takes long) are read back and compared with what
the server acknowledged. --servers N runs N servers on the one database (each with its
background work) behind a round-robin front that every request goes through, so that a
client's consecutive requests reach different servers. See docs/soak.md.

The report (text on stdout, JSON to --report) gives RSS and goroutines after the warm-up
(the first third) and at the end, query p50/p99 per range, samples sent, acknowledged and
read back per tenant, cross-tenant answers, status counts, retries and account requests per
sample. The exit status is 1 when a target fails: RSS growth after warm-up over 10%,
goroutines not flat, a sample not acknowledged or not read back, a cross-tenant answer.`,
		Example: `  tablets soak --duration 30m --tenants 4 --rate 5000 --outage-at 15m --outage 60s --report soak-report.json
  tablets soak --duration 2m --tenants 1 --rate 500 --outage 10s
  tablets soak --servers 3 --duration 5m`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Config takes 0 for 1 server; the flag asks for a number.
			if cfg.Servers < 1 {
				return usageErrorf(cmd, "--servers %d: at least 1", cfg.Servers)
			}
			if cfg.OutageAt == 0 && cfg.Outage > 0 {
				cfg.OutageAt = (cfg.Duration - cfg.Outage) / 2
			}
			if cfg.Tablets == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				cfg.Tablets = exe
			}
			cfg.ConnectionString = connString
			if cfg.ConnectionString == "" {
				cfg.ConnectionString = a.env(envConnectionString)
			}
			cfg.Progress = a.stderr
			rep, err := soak.Run(cmd.Context(), cfg)
			if errors.Is(err, tablets.ErrInvalidOptions) {
				return usageErrorf(cmd, "%v", err)
			}
			if err != nil {
				return err
			}
			if report != "" {
				f, err := os.Create(report)
				if err != nil {
					return err
				}
				if err := rep.WriteJSON(f); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			if err := rep.WriteText(a.stdout); err != nil {
				return err
			}
			if !rep.OK {
				return errSoakFailed
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&cfg.Duration, "duration", 30*time.Minute, "how long the load runs")
	f.IntVar(&cfg.Servers, "servers", 1, "'tablets serve' processes on the one database, behind a round-robin front when more than one")
	f.IntVar(&cfg.Tenants, "tenants", 4, "tenants writing and querying (one without a header if the server has no --config.file)")
	f.Float64Var(&cfg.Rate, "rate", 5000, "samples/s, all tenants together")
	f.DurationVar(&cfg.OutageAt, "outage-at", 0, "when the account outage starts, counted from the start of the load (0: so that the outage is in the middle)")
	f.DurationVar(&cfg.Outage, "outage", time.Minute, "how long the account is cut off (0: no outage)")
	f.DurationVar(&cfg.Scrape, "scrape-interval", 15*time.Second, "each series' sample interval: the series are --rate times this")
	f.DurationVar(&cfg.Backfill, "backfill", 0, "write this much history of every series before the load, as fast as the server takes it (scripts/soak: 1h, the dashboards' raw range)")
	f.DurationVar(&cfg.Settle, "settle", 20*time.Minute, "after a backfill, wait at most this long for the server's background work to catch up before the load")
	f.IntVar(&cfg.Verify, "verify", 0, "read back this many of each tenant's series at the end, spread over its targets (0: all; on Azurite a read-back takes long)")
	f.StringVar(&report, "report", "", "write the report as JSON to this file")
	f.StringVar(&connString, "connection-string", "", "the account, with a plain http table endpoint (default $"+envConnectionString+", else a local Azurite)")
	f.StringArrayVar(&cfg.ServeArgs, "serve-arg", nil, "one more flag for 'tablets serve' (repeatable: --serve-arg=--staging-partitions=4)")
	f.StringVar(&cfg.Dir, "dir", "", "keep the servers' logs (server.log, server-1.log, ...) and configuration here (default: a temporary directory, removed)")
	f.StringVar(&cfg.Tablets, "tablets", "", "the tablets executable to serve (default: this one)")
	_ = f.MarkHidden("tablets")
	return cmd
}
