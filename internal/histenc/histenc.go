// Package histenc is the codec of histogram chunks: native histogram samples (integer and
// float, every schema, custom bounds) at strictly increasing uint64 times, stored exactly.
// It is the storage format of tsdb's histogram tables, whose chunks live in Azure Table
// Edm.Binary properties (64 KiB at most): AppendLimit cuts a chunk to fit one.
//
// PLACEHOLDER: this JSON encoding is a stand-in so that callers can be built against the
// API; the real, compressed, versioned format replaces it before anything is stored.
package histenc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/seed71701133/tablets"
)

// Sample is one histogram sample: its time in resolution units and exactly one of H, FH.
type Sample struct {
	Unit uint64
	H    *tablets.Histogram
	FH   *tablets.FloatHistogram
}

// Errors of Decode and Header.
var (
	ErrVersion = errors.New("histenc: unknown chunk version")
	ErrCorrupt = errors.New("histenc: corrupt chunk")
)

// MinLimit is the smallest limit AppendLimit honours: a chunk always holds one sample.
const MinLimit = 1 << 10

// Append appends the chunk of samples (units strictly increasing, at least one) to dst.
func Append(dst []byte, samples []Sample) []byte {
	out, _ := AppendLimit(dst, samples, 1<<62)
	return out
}

// AppendLimit appends a chunk of the first n samples (n >= 1) whose encoding fits limit
// bytes (the first sample always goes in), and returns it and n.
func AppendLimit(dst []byte, samples []Sample, limit int) ([]byte, int) {
	n := len(samples)
	for {
		body, _ := json.Marshal(samples[:n])
		if len(body)+25 <= limit || n == 1 {
			dst = append(dst, 0)
			dst = binary.BigEndian.AppendUint64(dst, uint64(n))
			dst = binary.BigEndian.AppendUint64(dst, samples[0].Unit)
			dst = binary.BigEndian.AppendUint64(dst, samples[n-1].Unit)
			return append(dst, body...), n
		}
		n = max(1, n/2)
	}
}

// Header returns a chunk's count of samples and its first and last units, reading only
// its header.
func Header(chunk []byte) (count int, first, last uint64, err error) {
	if len(chunk) < 25 {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(chunk))
	}
	if chunk[0] != 0 {
		return 0, 0, 0, fmt.Errorf("%w %d", ErrVersion, chunk[0])
	}
	return int(binary.BigEndian.Uint64(chunk[1:])), binary.BigEndian.Uint64(chunk[9:]), binary.BigEndian.Uint64(chunk[17:]), nil
}

// Decode calls yield with each sample of a chunk, in time order; each has histograms of its
// own (yield may keep them).
func Decode(chunk []byte, yield func(Sample)) error {
	if _, _, _, err := Header(chunk); err != nil {
		return err
	}
	var samples []Sample
	if err := json.Unmarshal(chunk[25:], &samples); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	for _, s := range samples {
		yield(s)
	}
	return nil
}
