package tiers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
)

// histWindowVersion is the version of a histogram window's encoding (docs/format.md,
// "Histogram windows"), its first byte.
const histWindowVersion = 1

// maxHistWindowBytes bounds a histogram window's encoding: 24 of them and a block's other
// properties stay under Azure's 1 MiB an entity (and each under 64 KiB a property). A window
// whose histograms need more is stored as too large, and read raw.
const maxHistWindowBytes = 32 << 10

// errHistWindow is wrapped by the errors of decodeHistWindow.
var errHistWindow = errors.New("bad histogram window")

// appendHistWindow appends the encoding of w, a window starting at start, to dst.
func appendHistWindow(dst []byte, w *histWindow, start time.Time) []byte {
	head := len(dst)
	dst = append(dst, histWindowVersion, w.kind)
	dst = binary.AppendUvarint(dst, w.count)
	if w.kind == histTooLarge {
		return dst
	}
	samples := []histenc.Sample{histSample(w.first, start)}
	if w.count > 1 {
		samples = append(samples, histSample(w.last, start))
	}
	chunk := histenc.Append(nil, samples)
	dst = binary.AppendUvarint(dst, uint64(len(chunk)))
	dst = append(dst, chunk...)
	if w.kind != histConflict {
		var obs []byte
		if w.obs != nil {
			obs = histenc.Append(nil, []histenc.Sample{{FH: w.obs.floatHistogram(0)}})
		}
		dst = binary.AppendUvarint(dst, uint64(len(obs)))
		dst = append(dst, obs...)
	}
	if len(dst)-head > maxHistWindowBytes {
		dst = append(dst[:head], histWindowVersion, histTooLarge)
		dst = binary.AppendUvarint(dst, w.count)
	}
	return dst
}

// histSample is p as a sample of a chunk: its time in milliseconds from start.
func histSample(p tablets.HistogramPoint, start time.Time) histenc.Sample {
	return histenc.Sample{Unit: uint64(p.Time.Sub(start) / time.Millisecond), H: p.H, FH: p.FH}
}

// decodeHistWindow reads the encoding of a histogram window of step starting at start:
// exactly what appendHistWindow writes, else an error wrapping errHistWindow.
func decodeHistWindow(b []byte, start time.Time, step time.Duration) (*histWindow, error) {
	bad := func(format string, args ...any) (*histWindow, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{errHistWindow}, args...)...)
	}
	if len(b) < 3 {
		return bad("%d bytes", len(b))
	}
	if b[0] != histWindowVersion {
		return bad("version %d, this version reads %d", b[0], histWindowVersion)
	}
	w := &histWindow{kind: b[1]}
	if w.kind > histTooLarge {
		return bad("kind %d", w.kind)
	}
	count, n := binary.Uvarint(b[2:])
	if n <= 0 || count == 0 || len(binary.AppendUvarint(nil, count)) != n {
		return bad("count")
	}
	w.count, b = count, b[2+n:]
	if w.kind == histTooLarge {
		if len(b) != 0 {
			return bad("%d bytes after a window too large", len(b))
		}
		return w, nil
	}
	chunk, b, err := lengthPrefixed(b)
	if err != nil {
		return bad("first and last samples: %v", err)
	}
	var samples []tablets.HistogramPoint
	var units []uint64
	if err := histenc.Decode(chunk, func(s histenc.Sample) {
		samples = append(samples, tablets.HistogramPoint{Time: start.Add(time.Duration(s.Unit) * time.Millisecond), H: s.H, FH: s.FH})
		units = append(units, s.Unit)
	}); err != nil {
		return bad("first and last samples: %v", err)
	}
	if want := min(count, 2); uint64(len(samples)) != want {
		return bad("%d first and last samples of a window of %d", len(samples), count)
	}
	for i, p := range samples {
		if units[i] >= uint64(step/time.Millisecond) || (i > 0 && units[i] <= units[i-1]) {
			return bad("sample at %d ms outside the window or out of order", units[i])
		}
		if err := p.Validate(); err != nil || isStaleHistogram(p) {
			return bad("sample at %d ms: not a sample (%v)", units[i], err)
		}
	}
	w.first, w.last = samples[0], samples[len(samples)-1]
	if w.kind != histConflict {
		obs, rest, err := lengthPrefixed(b)
		if err != nil {
			return bad("observations: %v", err)
		}
		b = rest
		if len(obs) > 0 {
			var got []histenc.Sample
			if err := histenc.Decode(obs, func(s histenc.Sample) { got = append(got, s) }); err != nil {
				return bad("observations: %v", err)
			}
			if len(got) != 1 || got[0].FH == nil || got[0].Unit != 0 {
				return bad("observations are not one float histogram")
			}
			if err := checkObsLayout(got[0].FH); err != nil {
				return bad("observations: %v", err)
			}
			w.obs = denseOf(tablets.HistogramPoint{FH: got[0].FH})
		} else if w.kind == histGauge {
			return bad("a gauge window without observations")
		}
	}
	if len(b) != 0 {
		return bad("%d bytes after the window", len(b))
	}
	return w, nil
}

// lengthPrefixed splits b after a minimal uvarint length and that many bytes.
func lengthPrefixed(b []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || len(binary.AppendUvarint(nil, n)) != k {
		return nil, nil, errors.New("bad length")
	}
	if n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("length %d past the end", n)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// checkObsLayout checks the layout of a window's observations (schema, spans, bounds): their
// counts may be negative (a counter that went down without a reset, as its hint said).
func checkObsLayout(fh *tablets.FloatHistogram) error {
	c := *fh
	c.Count, c.ZeroCount = 0, 0
	c.PositiveBuckets, c.NegativeBuckets = make([]float64, len(fh.PositiveBuckets)), make([]float64, len(fh.NegativeBuckets))
	return c.Validate()
}
