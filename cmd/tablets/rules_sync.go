package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/seed71701133/tablets/server/rules"
)

// envPassword is the password of `tablets rules sync`'s basic auth when --password-file is
// not given.
const envPassword = "TABLETS_PASSWORD"

// syncFlags are the flags of `tablets rules sync`.
type syncFlags struct {
	address, tenant, user, passwordFile, caFile string
	timeout                                     time.Duration
	dryRun                                      bool
}

func (a *app) rulesSyncCommand() *cobra.Command {
	var sf syncFlags
	cmd := &cobra.Command{
		Use:   "sync [flags] PATH...",
		Short: "Load rule files into a tenant of a tablets server, through its ruler API (as mimirtool rules sync)",
		Long: `Load the rule groups of rule files into a tenant of a running 'tablets serve', through the
ruler configuration API (/prometheus/config/v1/rules), as 'mimirtool rules sync' does: each
file is a namespace; the groups of the files that are not stored, or stored otherwise, are
set; the stored groups of those namespaces that the files no longer hold are deleted.
Namespaces no file names are left as they are.

A PATH is a rule file, or a directory whose *.yml and *.yaml files (not its subdirectories)
are read. A file is either mimirtool's format, a top-level 'namespace:' beside 'groups:', or
a plain Prometheus rule file, whose namespace is the file's base name without its extension
(rules/alerts.yml: alerts). Every file is checked before anything is sent (as 'tablets rules
check', and group names unique in a namespace); two files of one namespace are an error.

--tenant sets X-Scope-OrgID (none: the default tenant); --user, with --password-file or
$` + envPassword + `, sends basic auth, as Prometheus and Grafana do to a server with
--web.config.file. --dry-run prints what would change, with the YAML lines of each change,
and changes nothing. Exit 1 if a file does not load or the server refuses a change (its
answer says why: a 400 names the bad rule, and nothing of that group is stored).`,
		Example: `  tablets rules sync --address http://tablets:9201 --tenant teama rules/
  tablets rules sync --tenant teama --user ci --password-file pw.txt --dry-run rules/*.yml`,
		Args: filesArgs,
		RunE: func(cmd *cobra.Command, paths []string) error {
			return a.rulesSync(cmd, sf, paths)
		},
	}
	f := cmd.Flags()
	f.StringVar(&sf.address, "address", "http://127.0.0.1:9201", "the URL of the tablets server (its --listen, with http:// or https://)")
	f.StringVar(&sf.tenant, "tenant", "", "the tenant (X-Scope-OrgID; none: the default tenant)")
	f.StringVar(&sf.user, "user", "", "the basic-auth user (of the server's --web.config.file)")
	f.StringVar(&sf.passwordFile, "password-file", "", "a file holding the basic-auth password (default $"+envPassword+")")
	f.StringVar(&sf.caFile, "ca-file", "", "the CA certificate(s) of an https server, PEM (default: the system's)")
	f.DurationVar(&sf.timeout, "timeout", time.Minute, "the timeout of each request")
	f.BoolVar(&sf.dryRun, "dry-run", false, "print the changes and make none")
	return cmd
}

// syncChange is a change of one group.
type syncChange struct {
	op, namespace, group string // op: create, update, delete
	old, new             []byte // the group's YAML, stored and wanted
}

func (a *app) rulesSync(cmd *cobra.Command, sf syncFlags, paths []string) error {
	c, err := newRulerClient(cmd, sf, a.env)
	if err != nil {
		return err
	}
	local, err := readNamespaces(paths)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	remote, err := c.list(ctx)
	if err != nil {
		return err
	}
	changes, unchanged, err := syncPlan(local, remote)
	if err != nil {
		return err
	}
	for _, ch := range changes {
		sign := map[string]string{"create": "+", "update": "~", "delete": "-"}[ch.op]
		fmt.Fprintf(a.stdout, "%s %s: %s (%s)\n", sign, ch.namespace, ch.group, ch.op)
		if sf.dryRun {
			for _, l := range lineDiff(string(ch.old), string(ch.new)) {
				fmt.Fprintln(a.stdout, "    "+l)
			}
		}
	}
	if sf.dryRun {
		fmt.Fprintf(a.stdout, "dry run: %d to create, %d to update, %d to delete, %d unchanged; nothing changed\n",
			countOps(changes, "create"), countOps(changes, "update"), countOps(changes, "delete"), unchanged)
		return nil
	}
	// Sets first, deletes last: a group renamed is evaluated under its new name before its
	// old one goes.
	slices.SortStableFunc(changes, func(x, y syncChange) int {
		return boolInt(x.op == "delete") - boolInt(y.op == "delete")
	})
	for _, ch := range changes {
		if ch.op == "delete" {
			err = c.do(ctx, http.MethodDelete, ch.namespace, ch.group, nil)
		} else {
			err = c.do(ctx, http.MethodPost, ch.namespace, "", ch.new)
		}
		if err != nil {
			return fmt.Errorf("rules sync: %s %s: %s: %w", ch.op, ch.namespace, ch.group, err)
		}
	}
	fmt.Fprintf(a.stdout, "synced: %d created, %d updated, %d deleted, %d unchanged\n",
		countOps(changes, "create"), countOps(changes, "update"), countOps(changes, "delete"), unchanged)
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func countOps(changes []syncChange, op string) int {
	n := 0
	for _, c := range changes {
		if c.op == op {
			n++
		}
	}
	return n
}

// readNamespaces reads the rule files of paths (a directory: its *.yml and *.yaml files) by
// namespace, every one checked; two files of one namespace are an error.
func readNamespaces(paths []string) (map[string][]rulefmt.RuleGroup, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("rules sync: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("rules sync: %w", err)
		}
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yml" || ext == ".yaml") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("rules sync: no rule file in %q", paths)
	}
	out := map[string][]rulefmt.RuleGroup{}
	from := map[string]string{}
	var errs []error
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		nf, err := rules.ParseNamespaceFile(f, doc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, ok := from[nf.Namespace]; ok {
			errs = append(errs, fmt.Errorf("%s and %s are both namespace %q", prev, f, nf.Namespace))
			continue
		}
		from[nf.Namespace] = f
		out[nf.Namespace] = nf.Groups
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("rules sync: %w", errors.Join(errs...))
	}
	return out, nil
}

// syncPlan compares the groups of the files with those stored, namespace by namespace (only
// the files' namespaces), by their YAML as the server stores it.
func syncPlan(local, remote map[string][]rulefmt.RuleGroup) ([]syncChange, int, error) {
	var changes []syncChange
	unchanged := 0
	for _, ns := range slices.Sorted(maps.Keys(local)) {
		stored := map[string][]byte{}
		for _, g := range remote[ns] {
			doc, err := rules.MarshalGroup(g)
			if err != nil {
				return nil, 0, err
			}
			stored[g.Name] = doc
		}
		wanted := map[string]bool{}
		for _, g := range local[ns] {
			wanted[g.Name] = true
			doc, err := rules.MarshalGroup(g)
			if err != nil {
				return nil, 0, err
			}
			old, ok := stored[g.Name]
			switch {
			case !ok:
				changes = append(changes, syncChange{op: "create", namespace: ns, group: g.Name, new: doc})
			case string(old) != string(doc):
				changes = append(changes, syncChange{op: "update", namespace: ns, group: g.Name, old: old, new: doc})
			default:
				unchanged++
			}
		}
		for _, name := range slices.Sorted(maps.Keys(stored)) {
			if !wanted[name] {
				changes = append(changes, syncChange{op: "delete", namespace: ns, group: name, old: stored[name]})
			}
		}
	}
	return changes, unchanged, nil
}

// lineDiff is a diff of two texts' lines: kept lines "  ", removed "- ", added "+ " (the
// longest common subsequence; rule groups are small).
func lineDiff(a, b string) []string {
	x, y := splitLines(a), splitLines(b)
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out = append(out, "  "+x[i])
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, "+ "+y[j])
			j++
		default:
			out = append(out, "- "+x[i])
			i++
		}
	}
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// rulerClient talks to a server's ruler configuration API.
type rulerClient struct {
	base                   *url.URL
	tenant, user, password string
	http                   *http.Client
}

func newRulerClient(cmd *cobra.Command, sf syncFlags, env func(string) string) (*rulerClient, error) {
	u, err := url.Parse(sf.address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf(cmd, "--address %q is not an http:// or https:// URL", sf.address)
	}
	if sf.timeout <= 0 {
		return nil, usageErrorf(cmd, "--timeout must be positive")
	}
	c := &rulerClient{base: u, tenant: sf.tenant, user: sf.user}
	if sf.user != "" {
		c.password = env(envPassword)
		if sf.passwordFile != "" {
			b, err := os.ReadFile(sf.passwordFile)
			if err != nil {
				return nil, usageErrorf(cmd, "--password-file: %v", err)
			}
			c.password = strings.TrimRight(string(b), "\r\n")
		}
	} else if sf.passwordFile != "" {
		return nil, usageErrorf(cmd, "--password-file without --user")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if sf.caFile != "" {
		pem, err := os.ReadFile(sf.caFile)
		if err != nil {
			return nil, usageErrorf(cmd, "--ca-file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageErrorf(cmd, "--ca-file %s: no PEM certificate", sf.caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c.http = &http.Client{Timeout: sf.timeout, Transport: transport}
	return c, nil
}

// rulerAPIPath is the API's path in Mimir's form.
const rulerAPIPath = "/prometheus/config/v1/rules"

// request sends a request to the API path of namespace and group (either may be "").
func (c *rulerClient) request(ctx context.Context, method, namespace, group string, body []byte) ([]byte, error) {
	u := *c.base
	p := strings.TrimSuffix(u.Path, "/") + rulerAPIPath
	raw := strings.TrimSuffix(u.EscapedPath(), "/") + rulerAPIPath
	for _, seg := range []string{namespace, group} {
		if seg != "" {
			p += "/" + seg
			raw += "/" + url.PathEscape(seg)
		}
	}
	u.Path, u.RawPath = p, raw
	var r io.Reader
	if body != nil {
		r = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}
	if c.tenant != "" {
		req.Header.Set("X-Scope-OrgID", c.tenant)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, u.Redacted(), resp.Status, strings.TrimSpace(string(answer)))
	}
	return answer, nil
}

func (c *rulerClient) do(ctx context.Context, method, namespace, group string, body []byte) error {
	_, err := c.request(ctx, method, namespace, group, body)
	return err
}

// list reads every group the tenant stores.
func (c *rulerClient) list(ctx context.Context) (map[string][]rulefmt.RuleGroup, error) {
	answer, err := c.request(ctx, http.MethodGet, "", "", nil)
	if err != nil {
		return nil, fmt.Errorf("rules sync: %w", err)
	}
	out := map[string][]rulefmt.RuleGroup{}
	if err := yaml.Unmarshal(answer, &out); err != nil {
		return nil, fmt.Errorf("rules sync: the server's rule groups: %w", err)
	}
	return out, nil
}
