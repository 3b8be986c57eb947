package staging

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/stageenc"
)

// ErrVersion is a staging entity of a version this reader does not know.
var ErrVersion = errors.New("unknown staging entity version")

// Decoded is one staging entity as read: its keys, stamp and columns' series (of float
// points, or of histogram samples).
type Decoded struct {
	PartitionKey, RowKey string
	ETag                 string // as read (empty from the cache's reads)
	Stamp                uint64
	Seq                  int // the entity's number in its write
	Version              int // Version or HistVersion
	Series               []stageenc.Series
	Hists                []stageenc.HistSeries
	// Wanted: Series holds only the float series the read asked for (the cache's reads
	// filter them as they assemble an entity), which a reader need not check again.
	Wanted bool
	// Slots are, for an entity the cache assembled for a read of some series, each of
	// Series' slot in the read (seriesSlots): nil otherwise.
	Slots []int32
	// pooled holds the slices above when assemble made them of its pool (release).
	pooled *assembled
}

// Record orders the records of one write: entity by entity, each in order.
func (d Decoded) Record(r int) int { return d.Seq<<20 | r }

// DecodedBytes is about the memory of d's decoded series.
func (d Decoded) DecodedBytes() int64 {
	n := int64(unsafe.Sizeof(d)) + 4*int64(cap(d.Slots))
	for _, s := range d.Series {
		n += int64(unsafe.Sizeof(s)) + int64(len(s.Key)) + 8*int64(cap(s.Times)+cap(s.Values))
	}
	for _, s := range d.Hists {
		n += int64(unsafe.Sizeof(s)) + int64(len(s.Key)) + int64(len(s.Samples))*HistBytes
	}
	return n
}

// Decode decodes one staging entity's JSON (as much of it as was selected) with e, keeping
// the float series want holds (nil: all): a read of a batch of series decodes entities that
// hold thousands, and only those of the batch cost memory.
func Decode(e *entity.Entity, raw []byte, want map[string]bool) (Decoded, error) {
	if err := e.Decode(raw); err != nil {
		return Decoded{}, err
	}
	d := Decoded{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), ETag: string(e.ETag)}
	stamp, seq, ok := StampOf(e.RowKey)
	if !ok {
		return Decoded{}, fmt.Errorf("staging entity %q: bad RowKey", e.RowKey)
	}
	d.Stamp, d.Seq = stamp, seq
	version := -1.0
	for _, p := range e.Props {
		if string(p.Name) == VersionProp {
			version = p.Value
		}
	}
	if version != Version && version != HistVersion {
		return Decoded{}, fmt.Errorf("staging entity %q: %w %v", e.RowKey, ErrVersion, version)
	}
	d.Version = int(version)
	for _, sp := range e.Strings {
		name := string(sp.Name)
		if !strings.HasPrefix(name, ColumnChar) {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(string(sp.Value))
		if err != nil {
			return Decoded{}, fmt.Errorf("staging entity %q column %s: %w", e.RowKey, name, err)
		}
		if d.Version == HistVersion {
			hists, err := stageenc.DecodeHist(b)
			if err != nil {
				return Decoded{}, fmt.Errorf("staging entity %q column %s: %w", e.RowKey, name, err)
			}
			d.Hists = append(d.Hists, hists...)
			continue
		}
		series, err := stageenc.DecodeSome(b, want)
		if err != nil {
			return Decoded{}, fmt.Errorf("staging entity %q column %s: %w", e.RowKey, name, err)
		}
		d.Series = append(d.Series, series...)
	}
	return d, nil
}

// Holds reports whether d holds a point or histogram sample of series in [lo, hi)
// milliseconds.
func (d Decoded) Holds(series string, lo, hi int64) bool {
	for _, s := range d.Series {
		if s.Key != series {
			continue
		}
		for _, ms := range s.Times {
			if ms >= lo && ms < hi {
				return true
			}
		}
	}
	for _, s := range d.Hists {
		if s.Key != series {
			continue
		}
		for _, h := range s.Samples {
			if ms := int64(h.Unit); ms >= lo && ms < hi {
				return true
			}
		}
	}
	return false
}

// Without is the body of a staging entity (decoded as e and d, read whole) without the
// points and histogram samples of series in [lo, hi), and whether nothing is left.
func Without(e *entity.Entity, d Decoded, series string, lo, hi int64) ([]byte, bool) {
	out := &Entity{PartitionKey: d.PartitionKey, RowKey: d.RowKey, Version: d.Version}
	for _, sp := range e.Strings {
		switch string(sp.Name) {
		case LoProp:
			v, _ := strconv.ParseUint(string(sp.Value), 16, 8)
			out.Lo = int(v)
		case HiProp:
			v, _ := strconv.ParseUint(string(sp.Value), 16, 8)
			out.Hi = int(v)
		}
	}
	for _, s := range d.Series {
		kept := s
		if s.Key == series {
			kept = stageenc.Series{Key: s.Key}
			for i, ms := range s.Times {
				if ms < lo || ms >= hi {
					kept.Times = append(kept.Times, ms)
					kept.Values = append(kept.Values, s.Values[i])
				}
			}
		}
		if len(kept.Times) > 0 {
			_, column := Hash(kept.Key)
			out.Add(column, kept, Piece{})
		}
	}
	for _, s := range d.Hists {
		kept := s
		if s.Key == series {
			kept = stageenc.HistSeries{Key: s.Key}
			for _, h := range s.Samples {
				if ms := int64(h.Unit); ms < lo || ms >= hi {
					kept.Samples = append(kept.Samples, h)
				}
			}
		}
		if len(kept.Samples) > 0 {
			_, column := Hash(kept.Key)
			first, last := int64(kept.Samples[0].Unit), int64(kept.Samples[len(kept.Samples)-1].Unit)
			out.AddHist(column, kept.Key, histenc.Append(nil, kept.Samples), first, last, len(kept.Samples), Piece{})
		}
	}
	return out.Body(), len(out.Pieces) == 0
}
