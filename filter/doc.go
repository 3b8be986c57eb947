// Package filter builds, escapes, parses and packs OData $filter expressions for Azure Table
// Storage.
//
// Every user-supplied string that reaches a filter goes through one escaping function,
// [Quote], which is called by [Compare] (and [Eq], [Ne], [Gt], [Ge], [Lt], [Le]). No input
// value can change the structure of a filter: a value is always one string literal.
// Property names are not escaped: they are library constants, validated by [Compare], which
// panics on an invalid name because that is a programming error, never user input.
//
// An [Expr] is an immutable expression tree. [And] and [Or] combine expressions;
// [Expr.String] renders OData text in which every compound operand is parenthesized, so the
// reading never depends on operator precedence:
//
//	PartitionKey eq 'O''Brien' and RowKey ge '001' and RowKey lt '002'
//	(PartitionKey eq 'a' and RowKey ge '1') or (PartitionKey eq 'b' and RowKey ge '1')
//
// Azure accepts no more than 15 discrete comparisons per $filter, and long request URLs fail
// (HTTP 414 on Azure; the Azurite emulator answers 431 near a 16.8K-character filter, and
// does not enforce the comparison limit at all). [Pack] splits a disjunction of clauses into
// as few filters as possible that each respect [Limits], keeping the clauses' order, and
// returns an error rather than a filter the service would reject.
//
// [Parse] reads back the subset of OData this package writes, and [Expr.Eval] evaluates an
// expression against an entity's string properties the way the service compares strings
// (ordinal, by UTF-16 code units), so plans can be checked without a server.
package filter
