// Package engineselect says, in a query's context, that its Selects are the PromQL
// engine's, from the query API (or the rules, which run on its engine) to the storage: the
// API does not import the database.
//
// The engine hands each Select hints of what it will evaluate. Of an instant selector of an
// instant query, not in a subquery, they have a Step and a Range of 0 (in a subquery, the
// Step is the subquery's, never 0: the engine's NoStepSubqueryIntervalFn gives one): the
// engine evaluates it once, at the hints' End, on each series' latest sample at or before
// it, and the storage need read no other (promstore.Querier.Select). Hints of the same
// shape from another caller (a remote read client's) promise nothing: without this mark
// the storage reads every sample of the range.
package engineselect

import "context"

type key struct{}

// With returns ctx marked as the engine's evaluation. Give it only to an engine whose
// NoStepSubqueryIntervalFn never returns 0.
func With(ctx context.Context) context.Context { return context.WithValue(ctx, key{}, true) }

// Is reports whether ctx is marked as the engine's evaluation (With).
func Is(ctx context.Context) bool { return ctx.Value(key{}) != nil }
