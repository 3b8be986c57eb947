package tiers

import (
	"fmt"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/internal/sketchenc"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// tierBlock is a tier entity as read, of either format: a row block (versions 1 and 2: 24
// windows, docs/format.md "Tier blocks"), a stale flag without windows (version 1's S
// only), or a columnar block (version 3, "Columnar tier blocks").
type tierBlock struct {
	series  string
	start   uint64 // Unix seconds: the first window's start
	step    time.Duration
	version int // 1 or 2 (rows), 3 (columnar); 0: a flag without windows
	rolled  float64
	etag    azcore.ETag
	// windows are the block's windows by index from start (len: its window count); nil: no
	// points nor histogram samples.
	windows []*Window
	// sealed says, per window, that a reader may trust it (where no dirty marker and no
	// staged point says otherwise): of a columnar block, as stored; of a row block, rolled
	// at least the reader's SealDelay after the window's end and not flagged stale.
	sealed []bool
	cols   blockenc.Columns // the columns read (a row block: all)
	// exact says the block stores its windows' NaNs and Resets (a columnar block with the
	// exactness column, read with it): the windows of one without have them unknown.
	exact bool
}

// end is the Unix second after the block's last window.
func (b *tierBlock) end() uint64 {
	return b.start + uint64(len(b.windows))*uint64(b.step/time.Second)
}

// decodeTierBlock reads a tier entity of either format (decoded with AllowStrings) of tier
// t, whose columnar blocks were read with cols selected (row blocks are read whole).
func (tr *Tiers) decodeTierBlock(e *entity.Entity, t Tier, cols blockenc.Columns) (*tierBlock, error) {
	series, _, ok := tr.keys.parse(string(e.PartitionKey), string(e.RowKey))
	if !ok {
		return nil, notBlock(e)
	}
	if tr.keys.packed() {
		// Packed tables hold columnar blocks only: no older version wrote them.
		if !blockenc.IsColumnar(e) {
			return nil, &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: "not a columnar block in a packed tier table"}
		}
		c, err := blockenc.DecodeColumnar(e, t.Step, tr.cfg.Accuracy, cols)
		if err != nil {
			return nil, err
		}
		return tr.fromColumnar(series, azcore.ETag(e.ETag), t, c)
	}
	if blockenc.IsColumnar(e) {
		flagged := dropStaleFlag(e)
		c, err := blockenc.DecodeColumnar(e, t.Step, tr.cfg.Accuracy, cols)
		if err != nil {
			return nil, err
		}
		tb, err := tr.fromColumnar(series, azcore.ETag(e.ETag), t, c)
		if err != nil {
			return nil, err
		}
		if flagged {
			// A Write of an older version flagged the row block at this key: its windows
			// are not to be trusted until rolled up again.
			for i := range min(blockWindows, len(tb.sealed)) {
				tb.sealed[i] = false
			}
		}
		return tb, nil
	}
	b, err := decodeBlock(e, t.Step, tr.cfg.Accuracy)
	if err != nil {
		return nil, err
	}
	tb := &tierBlock{series: series, start: b.start, step: t.Step, rolled: b.rolled, etag: azcore.ETag(e.ETag),
		windows: b.windows[:], sealed: make([]bool, blockWindows), cols: blockenc.AllColumns}
	tb.version = 1
	if b.stale && b.rolled == 0 {
		tb.version = 0
	}
	for i := range tb.windows {
		end := times.At(b.start).Add(time.Duration(i+1) * t.Step)
		tb.sealed[i] = !b.stale && b.rolled >= float64(end.Add(tr.cfg.SealDelay).Unix())
	}
	return tb, nil
}

// dropStaleFlag removes from e the stale flag S (version 1's, merged blind into the row
// block key that a columnar block shares) and reports whether it was set.
func dropStaleFlag(e *entity.Entity) bool {
	flagged := false
	e.Props = slices.DeleteFunc(e.Props, func(p entity.Prop) bool {
		if string(p.Name) != "S" {
			return false
		}
		flagged = flagged || p.Value == 1
		return true
	})
	return flagged
}

// fromColumnar is the tierBlock of a decoded columnar block.
func (tr *Tiers) fromColumnar(series string, etag azcore.ETag, t Tier, c *blockenc.Columnar) (*tierBlock, error) {
	tb := &tierBlock{series: series, start: c.Start, step: t.Step, version: blockenc.VersionColumnar, rolled: c.Rolled, etag: etag,
		windows: make([]*Window, len(c.Windows)), sealed: c.Sealed, cols: c.Columns, exact: c.Exact}
	blockStart := times.At(c.Start)
	// The windows of points in one allocation, not one each (a block of the minute tier
	// holds 1,440): they live as long as the read that decoded them.
	n := 0
	for _, w := range c.Windows {
		if w != nil {
			n++
		}
	}
	slab := make([]Window, n)
	for i, w := range c.Windows {
		ws := blockStart.Add(time.Duration(i) * t.Step)
		if w == nil {
			if c.Exact && c.NaNs[i] > 0 {
				tb.windows[i] = &Window{Start: ws, NaNs: c.NaNs[i], sk: sketchenc.New(tr.cfg.Accuracy)}
			}
			continue
		}
		nw := &slab[0]
		slab = slab[1:]
		*nw = Window{Start: ws, Count: w.Count, Sum: w.Sum, Min: w.Min, Max: w.Max, First: w.First, Last: w.Last,
			firstT: ws.Add(w.FirstAt), lastT: ws.Add(w.LastAt), sk: w.Sketch, Resets: w.Resets, resetsUnknown: !c.Exact && w.Count > 1}
		if c.Exact {
			nw.NaNs = c.NaNs[i]
		}
		tb.windows[i] = nw
	}
	for i, enc := range c.Histograms {
		if enc == nil {
			continue
		}
		ws := blockStart.Add(time.Duration(i) * t.Step)
		h, err := decodeHistWindow(enc, ws, t.Step)
		if err != nil {
			pk, rk := tr.keys.keys(series, c.Start)
			return nil, &entity.DecodeError{PartitionKey: pk, RowKey: rk, Reason: fmt.Sprintf("window %d: %v", i, err)}
		}
		if tb.windows[i] == nil {
			tb.windows[i] = &Window{Start: ws, sk: sketchenc.New(tr.cfg.Accuracy)}
		}
		tb.windows[i].hist = h
	}
	return tb, nil
}

// toColumnar is the columnar content of windows (by index from start, all of one block of
// tier t), sealed as given, rolled at rolled.
func toColumnar(start uint64, windows []*Window, sealed []bool, rolled float64, exact bool) *blockenc.Columnar {
	c := &blockenc.Columnar{Start: start, Rolled: rolled, Windows: make([]*blockenc.Window, len(windows)), Sealed: sealed, Exact: exact}
	n := 0
	for _, w := range windows {
		if w != nil && w.Count > 0 {
			n++
		}
	}
	slab := make([]blockenc.Window, n) // one allocation, as fromColumnar's
	for i, w := range windows {
		if w == nil {
			continue
		}
		if exact && w.NaNs > 0 {
			if c.NaNs == nil {
				c.NaNs = make([]uint64, len(windows))
			}
			c.NaNs[i] = w.NaNs
		}
		if w.hist != nil {
			if c.Histograms == nil {
				c.Histograms = make([][]byte, len(windows))
			}
			c.Histograms[i] = appendHistWindow(nil, w.hist, w.Start)
		}
		if w.Count == 0 {
			continue
		}
		slab[0] = blockenc.Window{Count: w.Count, Sum: w.Sum, Min: w.Min, Max: w.Max, First: w.First, Last: w.Last,
			FirstAt: w.firstT.Sub(w.Start), LastAt: w.lastT.Sub(w.Start), Sketch: w.sk, Resets: w.Resets}
		c.Windows[i], slab = &slab[0], slab[1:]
	}
	return c
}
