// Package pager is the read path both stores share: it runs a plan of sub-queries against
// the Table service with bounded concurrency, follows every continuation token (empty pages
// that carry one included), decodes the entities through the store's Layout and yields
// points in the plan's order; it issues and checks the opaque page tokens.
//
// A store is only its layout: how a series and a range of times become filter clauses, and
// how an entity becomes points. Query, QueryPage, QueryMany and Latest are written once,
// here, on top of that.
package pager
