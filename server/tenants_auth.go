package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/seed71701133/tablets/server/limits"
)

// maxDatabaseName is the longest name of a tsdb database.
const maxDatabaseName = 40

// refusal is why a request's tenant is refused, with its status.
type refusal struct {
	status int
	reason string // the label of tablets_tenant_refused_total
	msg    string
}

func (r *refusal) Error() string { return r.msg }

func refuse(status int, reason, format string, args ...any) error {
	return &refusal{status: status, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// authorize returns the tenant of r if its user may act for it under cfg, else a *refusal:
// 400 for a header that names no tenant this server can have, 403 for a tenant not allowed
// or a user not bound to it.
func (t *Tenants) authorize(r *http.Request, cfg *limits.Config) (string, error) {
	values := r.Header.Values(TenantHeader)
	if len(values) > 1 {
		return "", refuse(http.StatusBadRequest, "bad_id", "several %s headers: a request is for one tenant", TenantHeader)
	}
	id := limits.DefaultTenant
	if len(values) == 1 && values[0] != "" {
		id = values[0]
	}
	if strings.Contains(id, "|") {
		return "", refuse(http.StatusBadRequest, "multi_tenant", "%s %q: queries across tenants (tenants separated by |) are not supported", TenantHeader, id)
	}
	if id != limits.DefaultTenant {
		if err := checkTenantName(t.base, id); err != nil {
			return "", refuse(http.StatusBadRequest, "bad_id", "%s: %v", TenantHeader, err)
		}
	}
	if !cfg.Allowed(id) {
		return "", refuse(http.StatusForbidden, "not_allowed", "tenant %q is not allowed on this server (tenants.allow of its configuration)", id)
	}
	user, _, _ := r.BasicAuth() // its password was checked by the web config, if it sets basic_auth_users
	if !cfg.MayActFor(user, id) {
		if user == "" {
			return "", refuse(http.StatusForbidden, "user", "tenant %q: this server binds users to tenants; the request has no basic-auth user", id)
		}
		return "", refuse(http.StatusForbidden, "user", "user %q may not act for tenant %q", user, id)
	}
	return id, nil
}

// checkTenantName reports whether tenant id can have a database under base: a valid ID whose
// database name, base + "x" + id, is at most maxDatabaseName characters.
func checkTenantName(base, id string) error {
	if err := limits.CheckTenantID(id); err != nil {
		return err
	}
	n := maxDatabaseName - len(base) - 1
	if n < 1 {
		return fmt.Errorf("tenant ID %q: this server's database name %q is too long to have tenants (their database names are it, \"x\" and the ID: at most %d characters)",
			id, base, maxDatabaseName)
	}
	if len(id) > n {
		return fmt.Errorf("tenant ID %q is too long: this server's tenant IDs are at most %d characters (its database %q, plus \"x\" and the ID, make at most %d)",
			id, n, base, maxDatabaseName)
	}
	return nil
}

// tenantDatabase is the name of tenant id's database: base itself for the default tenant,
// else base + "x" + id. No table of a tsdb database has "x" after the database's name (see
// docs/format.md, "tsdb: table names"), so no tenant's table is named like one of another
// tenant or of the base database.
func tenantDatabase(base, id string) string {
	if id == limits.DefaultTenant {
		return base
	}
	return base + "x" + id
}
