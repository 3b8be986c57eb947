package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/seed71701133/tablets/server"
)

// Mimir's defaults of its ruler limits (-ruler.max-rule-groups-per-tenant,
// -ruler.max-rules-per-rule-group).
const (
	defaultRulerMaxGroups = 70
	defaultRulerMaxRules  = 20
)

// rulerFlags are the flags of `tablets serve` for the ruler configuration API and the rule
// groups it stores in the account, named as Mimir's.
type rulerFlags struct {
	enabled             bool
	pollEvery           time.Duration
	maxBodyBytes        int64
	maxGroups, maxRules int
}

func addRulerFlags(cmd *cobra.Command, r *rulerFlags) {
	f := cmd.Flags()
	f.BoolVar(&r.enabled, "ruler.enable-api", true, "serve the ruler configuration API of Cortex and Mimir (/prometheus/config/v1/rules, what mimirtool rules drives) and evaluate the rule groups it stores in each tenant's database")
	f.DurationVar(&r.pollEvery, "ruler.poll-interval", server.DefaultRulerPollEvery, "how often each tenant's stored rule groups are checked for a change another server made (one read of their generation): about the most such a change waits to be evaluated here")
	f.Int64Var(&r.maxBodyBytes, "ruler.max-body-bytes", server.DefaultRulerMaxBodyBytes, "the largest body of a rule group set through the API; larger: 413")
	f.IntVar(&r.maxGroups, "ruler.max-rule-groups-per-tenant", defaultRulerMaxGroups, "the most rule groups a tenant may store (0: no limit; ruler_max_rule_groups_per_tenant of --config.file overrides it)")
	f.IntVar(&r.maxRules, "ruler.max-rules-per-rule-group", defaultRulerMaxRules, "the most rules a stored group may have (0: no limit; ruler_max_rules_per_rule_group of --config.file overrides it)")
}

// options are the flags as server.RulerOptions (nil: the API is off).
func (r rulerFlags) options(cmd *cobra.Command) (*server.RulerOptions, error) {
	if r.pollEvery <= 0 || r.maxBodyBytes <= 0 || r.maxGroups < 0 || r.maxRules < 0 {
		return nil, usageErrorf(cmd, "--ruler.poll-interval and --ruler.max-body-bytes must be positive, --ruler.max-rule-groups-per-tenant and --ruler.max-rules-per-rule-group not negative")
	}
	if !r.enabled {
		return nil, nil
	}
	return &server.RulerOptions{PollEvery: r.pollEvery, MaxBodyBytes: r.maxBodyBytes}, nil
}
