// Package entity encodes points as the JSON entity bodies the Table service takes, decodes
// the entities it returns, and holds the service's limits.
//
// The encoder is ours rather than aztables.EDMEntity, which doubles single quotes inside
// keys and has no Double type (it writes 2.0 as the Int32 2). Values are written as
// Edm.Double: a number with a fraction or an exponent needs no annotation, an integral one
// (and NaN, Infinity, -Infinity, which are strings) carries "name@odata.type":"Edm.Double".
//
// The decoder reads an entity's raw JSON without building a map: it yields the keys, the
// ETag and every Double property in order, aliasing the input where it can, so decoding a
// row allocates nothing per point.
package entity
