// Package entity encodes points as the JSON entity bodies the Table service takes, decodes
// the entities it returns, and holds the service's limits.
//
// The encoder is ours rather than aztables.EDMEntity, which doubles single quotes inside
// keys and has no Double type (it writes 2.0 as the Int32 2). How values and bytes are
// written is specified in docs/format.md ("Entities on the wire").
//
// The decoder reads an entity's raw JSON without building a map: it yields the keys, the
// ETag and every Double property in order, aliasing the input where it can, so decoding a
// row allocates nothing per point.
package entity
