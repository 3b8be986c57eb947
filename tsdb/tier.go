package tsdb

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/seed71701133/tablets/entity"
)

// Tier is a rollup tier: windows of Step, aggregated from the raw points, kept in one table
// per Period.
type Tier struct {
	Step      time.Duration // window length: whole seconds; a multiple of the previous tier's Step
	Period    time.Duration // span of one table of the tier; 0: 7 days for steps under an hour, else 364 days
	Retention time.Duration // Retain drops the tier's tables whose whole span is older; 0: keep forever
}

// DefaultTiers are a minute kept 400 days and an hour kept forever.
var DefaultTiers = []Tier{{Step: time.Minute, Retention: 400 * 24 * time.Hour}, {Step: time.Hour}}

// blockWindows is the number of windows of a tier block: one entity per series and block,
// 24 windows of 9 properties (216, under Azure's 252). At an hour a block is a day; at a
// minute, 24 minutes.
const blockWindows = 24

// DefaultSealDelay is how long after its end a window is sealed (see Options.SealDelay).
const DefaultSealDelay = time.Hour

// sealMargin is the clock skew between processes that sealing tolerates: a Write flags the
// blocks of points older than SealDelay minus this.
const sealMargin = 5 * time.Minute

// checkTiers validates the tiers (already defaulted) and fills in their periods.
func checkTiers(tiers []Tier) ([]Tier, error) {
	out := make([]Tier, len(tiers))
	for i, t := range tiers {
		if t.Step < time.Second || t.Step%time.Second != 0 {
			return nil, fmt.Errorf("tier %d: Step %v is not a whole number of seconds", i, t.Step)
		}
		if i > 0 && t.Step%out[i-1].Step != 0 {
			return nil, fmt.Errorf("tier %d: Step %v is not a multiple of the previous tier's %v", i, t.Step, out[i-1].Step)
		}
		if t.Period == 0 {
			t.Period = 7 * 24 * time.Hour
			if t.Step >= time.Hour {
				t.Period = 364 * 24 * time.Hour
			}
		}
		if block := t.Step * blockWindows; t.Period < block || t.Period%block != 0 {
			return nil, fmt.Errorf("tier %d: Period %v is not a multiple of a block (%d windows of %v)", i, t.Period, blockWindows, t.Step)
		}
		if t.Retention < 0 {
			return nil, fmt.Errorf("tier %d: Retention %v is negative", i, t.Retention)
		}
		out[i] = t
	}
	return out, nil
}

// tierTable is the name of the table of tier t's period starting at p (Unix seconds):
// name + "t" + step in seconds + "p" + p.
func (db *DB) tierTable(t Tier, p uint64) string {
	return db.name + "t" + strconv.FormatInt(int64(t.Step/time.Second), 10) + "p" + strconv.FormatUint(p, 10)
}

// blockKey is the RowKey of the block starting at Unix second s: 12 digits.
func blockKey(s uint64) string {
	b := strconv.AppendUint(nil, s, 10)
	for len(b) < 12 {
		b = append([]byte{'0'}, b...)
	}
	return string(b)
}

// A block entity, format version 1 (property "V"):
//
//	PartitionKey  the series
//	RowKey        the block's start, Unix seconds, 12 digits
//	V             1 (Edm.Double): the format version
//	R             Edm.Double: when it was rolled up, Unix seconds (the roller's clock)
//	S             Edm.Double 1, if present: a Write has since written points in it (stale)
//	for each window i (0..23, Step each from the block start) that holds points:
//	  c<i> s<i> n<i> x<i> f<i> l<i>   Edm.Double: Count, Sum, Min, Max, First, Last
//	  a<i> b<i>                       Edm.Double: nanoseconds from the window's start to
//	                                  the times of First and Last (exact: under 2^53)
//	  q<i>                            Edm.Binary: the sketch (see appendSketch)
//
// A Write that flags a block stale upserts {"S":1} into it, merging: a block that does not
// exist then holds only S.
type block struct {
	start   uint64 // Unix seconds
	rolled  float64
	stale   bool
	windows [blockWindows]*Window // nil: no points
}

const blockVersion = 1

// appendBlock appends the entity of b (series, tier step).
func appendBlock(dst []byte, series string, step time.Duration, b *block) []byte {
	dst = entity.AppendKeys(dst, series, blockKey(b.start))
	dst = entity.AppendDouble(dst, "V", blockVersion)
	dst = entity.AppendDouble(dst, "R", b.rolled)
	for i, w := range b.windows {
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
		dst = entity.AppendDouble(dst, "a"+n, float64(w.firstT.Sub(w.Start)))
		dst = entity.AppendDouble(dst, "b"+n, float64(w.lastT.Sub(w.Start)))
		dst = entity.AppendBinary(dst, "q"+n, w.appendSketch(nil))
	}
	return entity.AppendEnd(dst)
}

// decodeBlock reads a block entity (decoded with AllowStrings) of a tier of step, at the
// given accuracy. A block that only holds S (flagged, never rolled up) decodes as stale.
func decodeBlock(e *entity.Entity, step time.Duration, accuracy float64) (*block, error) {
	bad := func(format string, args ...any) (*block, error) {
		return nil, &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: fmt.Sprintf(format, args...)}
	}
	start, err := strconv.ParseUint(string(e.RowKey), 10, 64)
	if err != nil || len(e.RowKey) != 12 {
		return bad("RowKey is not a block start")
	}
	b := &block{start: start}
	nums := map[string]float64{}
	for _, p := range e.Props {
		nums[string(p.Name)] = p.Value
	}
	if s, ok := nums["S"]; ok && s == 1 {
		b.stale = true
	}
	v, ok := nums["V"]
	if !ok {
		if !b.stale || len(nums) != 1 || len(e.Strings) != 0 {
			return bad("no format version")
		}
		return b, nil
	}
	if v != blockVersion {
		return bad("format version %v, this version reads %d", v, blockVersion)
	}
	b.rolled = nums["R"]
	sketches := map[string][]byte{}
	for _, s := range e.Strings {
		sketches[string(s.Name)] = s.Value
	}
	blockStart := time.Unix(int64(start), 0).UTC()
	for i := range blockWindows {
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
		sk, err := decodeSketch(raw, accuracy)
		if err != nil {
			return bad("window %d: %v", i, err)
		}
		if count < 1 || count != math.Trunc(count) || uint64(count) != sk.count() {
			return bad("window %d: count %v does not match its sketch's %d", i, count, sk.count())
		}
		ws := blockStart.Add(time.Duration(i) * step)
		w := &Window{Start: ws, Count: uint64(count), Sum: nums["s"+n], Min: nums["n"+n], Max: nums["x"+n],
			First: nums["f"+n], Last: nums["l"+n], sk: sk}
		a, b2 := nums["a"+n], nums["b"+n]
		if !(a >= 0 && a < float64(step) && b2 >= a && b2 < float64(step)) {
			return bad("window %d: times of First and Last outside the window", i)
		}
		w.firstT, w.lastT = ws.Add(time.Duration(a)), ws.Add(time.Duration(b2))
		b.windows[i] = w
	}
	return b, nil
}
