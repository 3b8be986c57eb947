// Package tsdb is a time-series database over many tables of one storage account: raw points
// in one table per period, retention by dropping whole tables.
//
// # Tables
//
// A database has a base name (letters and digits, starting with a letter, 3 to 40
// characters). Its tables are named from it, and it owns every table so named: a catalog
// (the tables dropped, and the label sets registered), and per period (RawPeriod, default 7
// days, epoch-aligned) a table of raw points and a series index (an entity per series with
// points there). The names, keys and properties of every table are specified, with
// examples, in docs/format.md.
//
// Each raw table holds a store of the Options' layout (default advanced). A period's tables
// are created on its first write, with the next period's, so that a new table (which Azure
// may throttle at first) is not new when its time comes. A Write lists its series in the
// period's index before it writes the points, once a period and process (a cache remembers
// it); Series reads the indexes of a range.
//
// # Labels
//
// A series is a string key; SeriesOf makes one from a label set (up{job="api"}): "l" and
// the first 128 bits of the SHA-256 of the set's canonical encoding (Labels.MarshalBinary;
// docs/format.md, "Label sets and series keys"), in hex. It fits every layout's keys whatever the labels hold, is the same in every process
// and version, and does not collide in practice (a chance under 1e-14 among a trillion
// sets). SeriesOf records the set in the catalog's registry, once a process.
//
// The index of a period has an entity per series with points there, a label set's in the
// partition of its metric name, a plain series' (a key SeriesOf never returned) in a
// partition of their own (docs/format.md, "The series index"). A Write that first gives a series points in a period
// writes its entry, reading the catalog if this process never saw the key: nothing depends
// on one process's memory. Select reads only the periods of its range, and only the
// partitions of the metric names its matchers allow when they allow few (`__name__="up"`,
// `__name__=~"a|b"`); it matches with Prometheus' semantics. Retain drops a period's index
// once no tier keeps windows of the period either: until then Select finds the series a tier
// holds after their raw points are gone.
//
// # Compaction
//
// With the chunked layout a frequent writer makes a chunk a write; Compact and
// KeepCompacted merge them in every raw table of a range.
//
// # Retention
//
// Azure Table Storage has no TTL. Retain deletes whole raw tables, one request each, once
// their whole span is older than RawRetention: the design guide's high-volume delete
// pattern. A dropped period is recorded in the catalog first: a Write of a point in it, or of
// any point older than the retention by the wall clock, fails with ErrExpired before any
// request, and the table is never created again (Azure answers 409 to a deleted table's name
// for 40 seconds and more). Reads over dropped periods return what remains.
//
// # Reads
//
// *DB implements tablets.Store over the raw tables: a read lists the database's tables (one
// request) and reads those its range overlaps, oldest first (Latest: newest first). Page
// tokens hold the time the next page starts at, bound to the series and range.
//
// # Rollup tiers
//
// Each tier (default: a minute kept 400 days, an hour kept forever) keeps windows of its Step
// in tables of its Period. A window holds Count, Sum, Min, Max, First, Last and a DDSketch of
// its points (quantiles within Accuracy, relative; sketches merge exactly), 24 windows an
// entity (a block; docs/format.md, "Tier blocks" and "Sketches").
//
// Rollup(from, to) computes the blocks from the raw points, conditionally on the ETags it read
// before them. Aggregate(series, from, to, step) merges the windows of all the series: it
// reads the coarsest tier whose Step divides step where its blocks are sealed (rolled up at
// least SealDelay after their end) and not flagged, and the raw points elsewhere. A Write of
// points older than SealDelay flags their blocks, after storing them: a late point is never
// hidden by a stale window, and recent writes cost nothing more.
package tsdb
