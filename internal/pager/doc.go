// Package pager runs the sub-queries of a read against the Table service: with bounded
// concurrency and one page of read-ahead (Pages), or one page at a time (Each, Fetch). It
// follows continuation tokens, empty pages that carry one included, and tells an empty page
// from a reply that is not an entity list. It also issues and checks the opaque page tokens
// of QueryPage. The reads themselves are the engine's (internal/engine).
package pager
