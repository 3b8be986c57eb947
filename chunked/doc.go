// Package chunked is the third layout of tablets: a series' points as compressed chunks
// with exact timestamps, on the shared engine (package tablets' Store, in full).
//
// Where advanced keeps a slot per resolution step (regular series only, about 24 bytes a
// point), chunked keeps any times, in any order, exactly at its Resolution (default 1 ms),
// and stores about 1 to 2 bytes a point for real metrics: counters and constants a third
// of a byte, a 2-decimal gauge about 1.3, random floats about 10 (their bits do not
// compress).
//
// # Entities
//
// A partition holds a series' chunks for one PartitionFactor of time (default a day). A
// chunk is one entity, keyed by the series and partition, its first time, the priority of
// its write and a hash of its bytes, with its last time (L) and the chunk (C): the keys and
// properties are specified, with an example, in docs/format.md ("Layout chunked"). The
// priority is the writing process's clock, strictly increasing within a process; the hash
// keeps two chunks of one write apart. A chunk never spans two partitions.
//
// # Writes never read
//
// A Write cuts the points of each partition into chunks of at most MaxChunkBytes and
// upserts them, a transaction per partition (up to 100 chunks): it reads nothing. A chunk's
// keys are a function of the call and its content, so a request retried after a lost reply
// writes the same entity again. Two calls that write the same time both keep a chunk; a
// read keeps the value of the chunk with the higher priority: the later write wins (across
// processes, by their clocks). Calling Write again with the same points after a failure
// stores them again, harmlessly: the values are the same.
//
// # Reads
//
// The chunks that hold times in [from, to) are those whose first time is before to and
// whose last (L) is at or after from: one filter of at most six comparisons. Chunks come in
// key order, by first time, so a point before the first time of the next chunk is final.
// A read never follows a continuation inside a partition: a query is a consistent snapshot
// only within one partition and one request, so when a reply is cut short the read starts
// again, in a fresh query, from the first time not yet final. A compaction that commits
// between two requests of a read therefore neither hides a point nor shows it twice.
//
// A chunk is read whole: a single point costs its chunk (at most MaxChunkBytes, 16 KiB by
// default). Choose chunked for irregular series and for cost; choose advanced to read
// single points or short ranges of a dense regular series often.
//
// # Compaction
//
// A collector that writes every second makes a chunk a second. Compact merges them: runs of
// small or overlapping chunks become as few full chunks as hold their points, each run in
// one transaction that deletes the chunks read only if their ETags are unchanged and
// inserts the merged ones (priority: the highest of the run). A concurrent Write is never
// lost (it adds a chunk of its own, with a higher priority); a concurrent Delete or Compact
// makes the transaction fail and the run start again. Nothing in the package runs it on a
// timer: beside a long-running writer, call Compact (or CompactAll) on one; a tsdb database's
// raw tables are compacted by the server's scheduler (`tablets serve`, `tablets maintain`).
//
// # Scans of a whole table
//
// Maintenance that visits every series (a database's rollups and compaction) reads a table
// at once instead of a series at a time: ScanChunks lists the keys of every chunk of a range
// with one query across partitions, ScanPoints reads their points, and CompactAll compacts
// the partitions a key scan finds holding several chunks. A query across partitions costs
// a request a page (at most 1,000 chunks, or 5 seconds of the service's time); on Azure it
// scans the table server-side. ScanPoints reads each partition within one request, as the
// reads above do.
//
// # Chunk format
//
// C holds a chunk of the codec of package internal/chunkenc (docs/format.md, "Chunks"): a
// header and a bit stream of delta-of-delta times under an adaptive Rice code, and values
// either as decimals (scaled integers, delta or delta-of-delta coded) or as Gorilla XOR. A
// reader rejects a chunk whose times disagree with its keys, or any malformed one, with an
// error naming the entity.
package chunked
