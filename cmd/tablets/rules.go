package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/spf13/cobra"

	"github.com/seed71701133/tablets/server/rules"
)

func (a *app) rulesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Check and unit-test Prometheus rule files, as promtool does; load them into a server",
		Long: `Rule files in Prometheus' format, as 'tablets serve --rule.file' evaluates them (see
docs/rules.md):

  tablets rules check FILE...   as 'promtool check rules'
  tablets rules test FILE...    as 'promtool test rules': its unit-test files
  tablets rules sync PATH...    as 'mimirtool rules sync': into a tenant of a server,
                                through its ruler API

check and test print promtool's report and exit 1 if a file fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	check := &cobra.Command{
		Use:   "check FILE...",
		Short: "Check rule files: YAML, expressions, templates, names (as promtool check rules)",
		Long: `Check rule files as Prometheus loads them, and as 'promtool check rules' does: the YAML and
its fields, each expression, each label and annotation template, names, group names unique
in a file. Recording rules recording the same series twice are a warning. Exit 1 if a file
does not load.`,
		Args: filesArgs,
		RunE: func(cmd *cobra.Command, files []string) error {
			if !rules.Check(a.stdout, a.stderr, files...) {
				return errors.New("rules check: a rule file does not load")
			}
			return nil
		},
	}
	var run []string
	test := &cobra.Command{
		Use:   "test FILE...",
		Short: "Run unit tests of rules (promtool's test rules format)",
		Long: `Run the unit tests of rules in files of the format of 'promtool test rules': rule_files,
evaluation_interval, group_eval_order, fuzzy_compare, and tests, each with its interval,
input_series (in the expanding notation: 1+2x3, _, stale), external_labels, external_url,
alert_rule_test (the firing alerts at eval_time) and promql_expr_test (an expression's
result at eval_time). The rules are evaluated with Prometheus' rule manager over its
in-memory test storage, as promtool does. Exit 1 if a test fails.`,
		Example: `  tablets rules test tests/*.yml
  tablets rules test --run 'disk' alerts_test.yml`,
		Args: filesArgs,
		RunE: func(cmd *cobra.Command, files []string) error {
			opts := &rules.TestOptions{}
			if len(run) > 0 {
				re, err := regexp.Compile(strings.Join(run, "|"))
				if err != nil {
					return usageErrorf(cmd, "--run: %v", err)
				}
				opts.Run = re
			}
			if !rules.Test(a.stdout, a.stderr, opts, files...) {
				return errors.New("rules test: a test failed")
			}
			return nil
		},
	}
	test.Flags().StringArrayVar(&run, "run", nil, "run only the test groups whose name matches this regular expression (repeatable: any of them)")
	cmd.AddCommand(check, test, a.rulesSyncCommand())
	return cmd
}

// ruleFlags are the flags of `tablets serve` for rules and alerts, named as Prometheus'.
type ruleFlags struct {
	files, externalLabels, alertmanagers []string
	tenant, externalURL, alertingFile    string
	evalInterval, queryOffset            time.Duration
	amTimeout                            time.Duration
	queueCapacity                        int
	outageTolerance, gracePeriod, resend time.Duration
	lease                                leaseFlags
}

func addRuleFlags(cmd *cobra.Command, r *ruleFlags) {
	f := cmd.Flags()
	f.StringArrayVar(&r.files, "rule.file", nil, "a Prometheus rule file to evaluate, or a glob (repeatable; as rule_files; read again on SIGHUP)")
	f.StringVar(&r.tenant, "rule.tenant", "", "the tenant whose data the rule files read and whose database they write (default: the default tenant)")
	f.DurationVar(&r.evalInterval, "rule.evaluation-interval", rules.DefaultEvaluationInterval, "the interval of the rule groups that set none (global.evaluation_interval)")
	f.DurationVar(&r.queryOffset, "rule.query-offset", 0, "the query offset of the rule groups that set none (global.rule_query_offset)")
	f.StringArrayVar(&r.externalLabels, "rule.external-label", nil, "NAME=VALUE added to every alert sent, and $externalLabels in templates (repeatable; global.external_labels)")
	f.StringVar(&r.externalURL, "web.external-url", "", "the URL tablets is reached at: alerts' generator URL, $externalURL in templates (default: http:// and --listen)")
	f.StringArrayVar(&r.alertmanagers, "alertmanager.url", nil, "an Alertmanager to send alerts to, http(s)://host:port[/prefix], API v2; user:password@ for basic auth (repeatable)")
	f.StringVar(&r.alertingFile, "alerting.config.file", "", "a Prometheus configuration file whose alerting section (alertmanagers with static_configs, alert_relabel_configs) says where alerts go, besides --alertmanager.url (its other sections are not read; read at start)")
	f.DurationVar(&r.amTimeout, "alertmanager.timeout", rules.DefaultAlertmanagerTimeout, "the timeout of a request to an Alertmanager")
	f.IntVar(&r.queueCapacity, "alertmanager.notification-queue-capacity", rules.DefaultNotificationQueueCapacity, "alerts waiting to be sent, at most (a tenant)")
	f.DurationVar(&r.outageTolerance, "rules.alert.for-outage-tolerance", rules.DefaultOutageTolerance, "the longest outage after which alerts' for state is still restored")
	f.DurationVar(&r.gracePeriod, "rules.alert.for-grace-period", rules.DefaultForGracePeriod, "the least time between a restore and an alert firing; alerts with a shorter for are not restored")
	f.DurationVar(&r.resend, "rules.alert.resend-delay", rules.DefaultResendDelay, "how often a firing alert is sent again")
	addLeaseFlags(f, &r.lease)
}

// options are the flags as rules.Options (nil: no rule file and no stored rule groups), the
// rule files checked. With stored (the ruler API), they are the options of every tenant's
// rules, the files' or not.
func (r ruleFlags) options(cmd *cobra.Command, listen string, stored bool) (*rules.Options, error) {
	if len(r.files) == 0 && !stored {
		if len(r.alertmanagers) > 0 || r.alertingFile != "" {
			return nil, usageErrorf(cmd, "--alertmanager.url or --alerting.config.file without --rule.file or --ruler.enable-api: no rule sends alerts")
		}
		return nil, nil
	}
	if r.evalInterval <= 0 || r.queryOffset < 0 || r.amTimeout <= 0 || r.queueCapacity <= 0 || r.outageTolerance <= 0 || r.gracePeriod <= 0 || r.resend <= 0 {
		return nil, usageErrorf(cmd, "--rule.evaluation-interval, --alertmanager.* and --rules.alert.* must be positive, --rule.query-offset not negative")
	}
	b := labels.NewScratchBuilder(len(r.externalLabels))
	seen := map[string]bool{}
	for _, kv := range r.externalLabels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" || seen[k] {
			return nil, usageErrorf(cmd, "--rule.external-label %q: want NAME=VALUE, each name once", kv)
		}
		seen[k] = true
		b.Add(k, v)
	}
	b.Sort()
	url := r.externalURL
	if url == "" {
		host := listen
		if strings.HasPrefix(host, ":") {
			host = "localhost" + host
		}
		url = "http://" + host
	}
	files, err := rules.ExpandFiles(r.files)
	if err != nil {
		return nil, usageErrorf(cmd, "--rule.file: %v", err)
	}
	if _, err := rules.ParseFiles(files); err != nil {
		return nil, fmt.Errorf("--rule.file: %w", err)
	}
	lease, err := r.lease.options(cmd)
	if err != nil {
		return nil, err
	}
	var alerting *config.AlertingConfig
	if r.alertingFile != "" {
		if alerting, err = rules.LoadAlerting(r.alertingFile); err != nil {
			return nil, usageErrorf(cmd, "--alerting.config.file: %v", err)
		}
	}
	return &rules.Options{Alerting: alerting, Files: r.files, EvaluationInterval: r.evalInterval, QueryOffset: r.queryOffset,
		ExternalLabels: b.Labels(), ExternalURL: url, Alertmanagers: r.alertmanagers, AlertmanagerTimeout: r.amTimeout,
		NotificationQueueCapacity: r.queueCapacity, OutageTolerance: r.outageTolerance, ForGracePeriod: r.gracePeriod,
		ResendDelay: r.resend, Lease: lease}, nil
}

// filesArgs requires at least one file argument.
func filesArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return usageErrorf(cmd, "no file given")
	}
	return nil
}
