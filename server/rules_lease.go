package server

import (
	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/server/rules"
)

// withLeaseTable gives the rules' leases, if they have none, the catalog of the server's
// database (docs/format.md, "Rule group leases"), their requests in the ingest class: a
// lease request waiting behind queries could cost the lease.
func (s *Server) withLeaseTable(o *rules.Options) {
	if o.Lease == nil || o.Lease.Table != nil {
		return
	}
	lo := *o.Lease
	lo.Table = rules.NewLeaseTable(s.db.CatalogClient(), reqlimit.Ingest)
	o.Lease = &lo
}
