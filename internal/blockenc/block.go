package blockenc

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/sketchenc"
)

// Windows is the number of windows of a block: one entity per series and block, 24 windows
// of 9 properties and a tenth for histogram windows (240, and V, R, S: under Azure's 252). At an hour a block is a day; at a minute, 24
// minutes.
const Windows = 24

// Version is the format version of a block of float windows only, the block's property V.
const Version = 1

// VersionHistograms is the format version of a block that also holds histogram windows
// (properties h0..h23): a reader of version 1 only would miss them, so it must reject them.
const VersionHistograms = 2

// Window is the aggregate of the points of one window.
type Window struct {
	Count                      uint64 // at least 1: a block stores no empty window
	Sum, Min, Max, First, Last float64
	FirstAt, LastAt            time.Duration // the times of First and Last, from the window's start
	Sketch                     *sketchenc.Sketch
	// Resets is the sum of the values that a smaller one follows, between the window's
	// consecutive points in time order: PromQL's counter reset correction, so that the
	// increase over the window is Last - First + Resets. Columnar blocks with Exact only.
	Resets float64
}

// Block is a block's content.
type Block struct {
	Start   uint64           // Unix seconds
	Rolled  float64          // when it was rolled up, Unix seconds
	Stale   bool             // a Write has since written points in it
	Windows [Windows]*Window // nil: no points
	// Histograms are the encoded histogram windows (opaque here), nil where a window holds
	// no histogram sample.
	Histograms [Windows][]byte
}

// Key is the RowKey of the block starting at Unix second start: 12 digits.
func Key(start uint64) string {
	b := strconv.AppendUint(nil, start, 10)
	for len(b) < 12 {
		b = append([]byte{'0'}, b...)
	}
	return string(b)
}

// Append appends the entity of b in the partition of series; its windows of Count 0 are
// left out. Stale is not written: a block is written when rolled up, so current.
func Append(dst []byte, series string, b *Block) []byte {
	dst = entity.AppendKeys(dst, series, Key(b.Start))
	version := Version
	for _, h := range b.Histograms {
		if h != nil {
			version = VersionHistograms
		}
	}
	dst = entity.AppendDouble(dst, "V", float64(version))
	dst = entity.AppendDouble(dst, "R", b.Rolled)
	for i, w := range b.Windows {
		if w == nil || w.Count == 0 {
			continue
		}
		n := strconv.Itoa(i)
		dst = entity.AppendDouble(dst, "c"+n, float64(w.Count))
		dst = entity.AppendDouble(dst, "s"+n, w.Sum)
		dst = entity.AppendDouble(dst, "n"+n, w.Min)
		dst = entity.AppendDouble(dst, "x"+n, w.Max)
		dst = entity.AppendDouble(dst, "f"+n, w.First)
		dst = entity.AppendDouble(dst, "l"+n, w.Last)
		dst = entity.AppendDouble(dst, "a"+n, float64(w.FirstAt))
		dst = entity.AppendDouble(dst, "b"+n, float64(w.LastAt))
		dst = entity.AppendBinary(dst, "q"+n, w.Sketch.Append(nil))
	}
	for i, h := range b.Histograms {
		if h != nil {
			dst = entity.AppendBinary(dst, "h"+strconv.Itoa(i), h)
		}
	}
	return entity.AppendEnd(dst)
}

// AppendStale appends the merge body that flags the block of series starting at start
// stale: {"S":1}. Merged into a block that does not exist, it makes one that holds only S.
func AppendStale(dst []byte, series string, start uint64) []byte {
	return entity.AppendEnd(entity.AppendDouble(entity.AppendKeys(dst, series, Key(start)), "S", 1))
}

// Decode reads a block entity (decoded with AllowStrings) of a tier of step, whose sketches
// have relative accuracy accuracy. An entity that only holds S (flagged, never rolled up)
// decodes as a stale block without windows. What is not a block is an *entity.DecodeError.
func Decode(e *entity.Entity, step time.Duration, accuracy float64) (*Block, error) {
	bad := func(format string, args ...any) (*Block, error) {
		return nil, &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: fmt.Sprintf(format, args...)}
	}
	start, err := strconv.ParseUint(string(e.RowKey), 10, 64)
	if err != nil || len(e.RowKey) != 12 {
		return bad("RowKey is not a block start")
	}
	b := &Block{Start: start}
	nums := map[string]float64{}
	for _, p := range e.Props {
		nums[string(p.Name)] = p.Value
	}
	if s, ok := nums["S"]; ok && s == 1 {
		b.Stale = true
	}
	v, ok := nums["V"]
	if !ok {
		if !b.Stale || len(nums) != 1 || len(e.Strings) != 0 {
			return bad("no format version")
		}
		return b, nil
	}
	if v != Version && v != VersionHistograms {
		return bad("format version %v, this version reads %d and %d", v, Version, VersionHistograms)
	}
	b.Rolled = nums["R"]
	sketches := map[string][]byte{}
	for _, s := range e.Strings {
		sketches[string(s.Name)] = s.Value
	}
	histograms := 0
	for i := range Windows {
		enc, ok := sketches["h"+strconv.Itoa(i)]
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(string(enc))
		if err != nil || len(raw) == 0 {
			return bad("window %d: histograms are not base64", i)
		}
		b.Histograms[i] = raw
		histograms++
	}
	if (v == VersionHistograms) != (histograms > 0) {
		return bad("format version %v with %d histogram windows", v, histograms)
	}
	for i := range Windows {
		n := strconv.Itoa(i)
		count, ok := nums["c"+n]
		if !ok {
			continue
		}
		enc, ok := sketches["q"+n]
		if !ok {
			return bad("window %d has no sketch", i)
		}
		raw, err := base64.StdEncoding.DecodeString(string(enc))
		if err != nil {
			return bad("window %d: sketch is not base64", i)
		}
		sk, err := sketchenc.Decode(raw, accuracy)
		if err != nil {
			return bad("window %d: %v", i, err)
		}
		if count < 1 || count != math.Trunc(count) || uint64(count) != sk.Count() {
			return bad("window %d: count %v does not match its sketch's %d", i, count, sk.Count())
		}
		a, z := nums["a"+n], nums["b"+n]
		if !(a >= 0 && a < float64(step) && z >= a && z < float64(step)) {
			return bad("window %d: times of First and Last outside the window", i)
		}
		b.Windows[i] = &Window{Count: uint64(count), Sum: nums["s"+n], Min: nums["n"+n], Max: nums["x"+n],
			First: nums["f"+n], Last: nums["l"+n], FirstAt: time.Duration(a), LastAt: time.Duration(z), Sketch: sk}
	}
	return b, nil
}
