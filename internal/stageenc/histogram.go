package stageenc

import (
	"encoding/binary"
	"fmt"

	"github.com/seed71701133/tablets/internal/histenc"
)

// HistVersion is the first byte of every histogram column: a float column (Version) and a
// histogram column never read as each other.
const HistVersion = 2

// HistHeaderSize is the size of a histogram column's header: its version byte.
const HistHeaderSize = 1

// HistSeries is one series' histogram samples in a histogram column: Units strictly
// increasing (milliseconds), each sample with exactly one of H and FH, valid as
// tablets.HistogramPoint.Validate checks.
type HistSeries struct {
	Key     string
	Samples []histenc.Sample
}

// AppendHist appends the histogram column holding series (in the given order) to dst: the
// version byte, then per series its key (as in a float column), the length of its chunk as
// a uvarint and the internal/histenc chunk of its samples. Every HistSeries must have a
// non-empty key and at least one sample; AppendHist panics otherwise, and where
// histenc.Append does (the caller validated the samples).
func AppendHist(dst []byte, series []HistSeries) []byte {
	dst = append(dst, HistVersion)
	for _, s := range series {
		dst = AppendHistRecord(dst, s.Key, histenc.Append(nil, s.Samples))
	}
	return dst
}

// AppendHistRecord appends one series' record, its chunk already encoded (so that a caller
// sizing records encodes each once).
func AppendHistRecord(dst []byte, key string, chunk []byte) []byte {
	if key == "" {
		panic("stageenc: a histogram series with an empty key")
	}
	if n, _, _, err := histenc.Header(chunk); err != nil || n == 0 {
		panic(fmt.Sprintf("stageenc: histogram series %q: no samples in its chunk (%v)", key, err))
	}
	dst = appendKey(dst, key)
	dst = binary.AppendUvarint(dst, uint64(len(chunk)))
	return append(dst, chunk...)
}

// HistRecordSize is the exact size of the record of a series whose chunk has n bytes.
func HistRecordSize(key string, n int) int {
	size := 1 + seriesKeyBytes
	if !isSeriesKey(key) {
		size = 1 + uvarintLen(uint64(len(key))) + len(key)
	}
	return size + uvarintLen(uint64(n)) + n
}

// DecodeHist reads a histogram column. It returns an error wrapping ErrInvalid (never
// panics) for a wrong version, a truncated or malformed record, a key in the wrong form, a
// chunk that internal/histenc does not decode or that holds no sample.
func DecodeHist(b []byte) ([]HistSeries, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrInvalid)
	}
	if b[0] != HistVersion {
		return nil, fmt.Errorf("%w: version %d, not %d", ErrInvalid, b[0], HistVersion)
	}
	r := &reader{b: b, off: 1, record: -1}
	var out []HistSeries
	for r.off < len(r.b) {
		r.record = len(out)
		key, err := r.key()
		if err != nil {
			return nil, err
		}
		n, err := r.uvarint("the chunk length")
		if err != nil {
			return nil, err
		}
		if n == 0 || n > uint64(r.left()) {
			return nil, r.errorf("a chunk of %d bytes in %d", n, r.left())
		}
		chunk := r.b[r.off : r.off+int(n)]
		s := HistSeries{Key: string(key)}
		if err := histenc.Decode(chunk, func(x histenc.Sample) { s.Samples = append(s.Samples, x) }); err != nil {
			return nil, r.errorf("chunk: %v", err)
		}
		if len(s.Samples) == 0 {
			return nil, r.errorf("a chunk without samples")
		}
		r.off += int(n)
		out = append(out, s)
	}
	return out, nil
}
