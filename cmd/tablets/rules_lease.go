package main

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/seed71701133/tablets/server/rules"
)

// leaseFlags are the flags of `tablets serve` for the leases of rule groups: one server of
// those sharing a database evaluates each group (docs/rules.md, "Several servers").
type leaseFlags struct {
	min    time.Duration
	holder string
}

func addLeaseFlags(f *pflag.FlagSet, l *leaseFlags) {
	f.DurationVar(&l.min, "rule.lease", rules.DefaultLeaseMin, "the shortest lease of a rule group: of the servers sharing the database, the one holding a group's lease evaluates it; a lease lasts max(this, 2 × the group's interval), and a dead holder's group is taken over within about its interval plus its lease; 0: no leases, every server evaluates every group")
	f.StringVar(&l.holder, "rule.lease-holder", "", "this server's name in the leases it holds, unique among the servers (default: host name, process id and a random number)")
}

// options are the flags as rules.LeaseOptions (nil: --rule.lease=0).
func (l leaseFlags) options(cmd *cobra.Command) (*rules.LeaseOptions, error) {
	switch {
	case l.min == 0:
		if l.holder != "" {
			return nil, usageErrorf(cmd, "--rule.lease-holder with --rule.lease=0: no leases")
		}
		return nil, nil
	case l.min < 2*time.Second || l.min > 12*time.Hour:
		return nil, usageErrorf(cmd, "--rule.lease %v: want 0 (no leases) or 2s to 12h", l.min)
	case len(l.holder) > 256:
		return nil, usageErrorf(cmd, "--rule.lease-holder: at most 256 bytes")
	}
	return &rules.LeaseOptions{Min: l.min, Holder: l.holder}, nil
}
