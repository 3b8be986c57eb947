// Package rules evaluates Prometheus recording and alerting rules over a tenant's database
// with Prometheus' own rule engine (its rules and notifier packages), so that the semantics
// are Prometheus': rule files in its format, `for`, keep_firing_for, labels and annotations
// with templates, limit, query_offset, evaluation at times aligned on the interval and
// offset by a hash of the group, ALERTS and ALERTS_FOR_STATE written as Prometheus writes
// them, and the `for` state restored from ALERTS_FOR_STATE when a Manager starts.
//
// A Manager reads its expressions through a QueryFunc (package server gives the tenant's
// query engine over the same Queryable as its query API) and writes its results through a
// Writer (package server gives the tenant's remote-write handler: the same write path as a
// remote write, the tenant's database and limits). Alerts go to Alertmanagers through
// Prometheus' notifier, with its queue and the v2 API.
//
// Where rules come from: rule files (ExpandFiles, ParseFiles), checked whole before they
// replace the rules in force. The Manager's group loader serves the groups last checked,
// from memory, so another source (rule groups stored in the account) can feed it the same
// way.
//
// Which of several servers evaluates a group: with Options.Lease, the one holding the
// group's lease, an entity of a LeaseTable (package server: the catalog of the tenant's
// database; docs/format.md, "Rule group leases"), taken and renewed conditionally on its
// ETag at each evaluation, ended by the service's clock; a server that takes a group
// restores its alerts' state from ALERTS_FOR_STATE first (docs/rules.md, "Several
// servers"). The leases are an Options.EvalIteration, the seam called for every evaluation
// of every group.
//
// The command's `tablets rules check` and `tablets rules test` are Check and Test, the
// latter promtool's unit tests of rules (its file format and output), run over Prometheus'
// in-memory test storage as promtool runs them.
package rules
