package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seed71701133/tablets"
)

// memStore is an in-memory reference implementation of tablets.Store: the suite's own
// fixture, proving the suite runnable and self-consistent without Azurite. Its request
// counter counts operations (one per call that passes validation, one per page).
type memStore struct {
	r   time.Duration
	ops atomic.Int64

	mu     sync.Mutex
	series map[string]map[tkey]float64
}

var _ tablets.Store = (*memStore)(nil)

func newMemStore(r time.Duration) *memStore {
	return &memStore{r: r, series: map[string]map[tkey]float64{}}
}

// maxSeriesBytes keeps a key (series plus a fixed-width time) within Azure's 1 KiB.
const maxSeriesBytes = 1000

func checkSeries(s string) error {
	if s == "" || len(s) > maxSeriesBytes || !utf8.ValidString(s) {
		return fmt.Errorf("%w: %q", tablets.ErrInvalidSeries, s)
	}
	for _, r := range s {
		if r == '/' || r == '\\' || r == '#' || r == '?' || r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return fmt.Errorf("%w: %q contains %U", tablets.ErrInvalidSeries, s, r)
		}
	}
	return nil
}

func checkTime(t time.Time) error {
	if t.Before(tablets.MinTime) || t.After(tablets.MaxTime) {
		return fmt.Errorf("%w: %s", tablets.ErrInvalidTime, t.Format(time.RFC3339Nano))
	}
	return nil
}

func checkRange(from, to time.Time) error {
	if err := checkTime(from); err != nil {
		return err
	}
	if err := checkTime(to); err != nil {
		return err
	}
	if from.After(to) {
		return fmt.Errorf("%w: from after to", tablets.ErrInvalidTime)
	}
	return nil
}

func (s *memStore) Write(ctx context.Context, series string, points ...tablets.Point) error {
	if err := checkSeries(series); err != nil {
		return err
	}
	for _, p := range points {
		if err := checkTime(p.Time); err != nil {
			return err
		}
	}
	s.ops.Add(1)
	if err := ctx.Err(); err != nil {
		return &tablets.WriteError{Series: series, Failed: points, Index: -1, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.series[series]
	if m == nil {
		m = map[tkey]float64{}
		s.series[series] = m
	}
	for _, p := range points {
		m[keyOf(floorTime(p.Time, s.r))] = p.Value
	}
	return nil
}

// read returns the series' points with from <= stored time < to, oldest first.
func (s *memStore) read(series string, from, to time.Time) []tablets.Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []tablets.Point
	for k, v := range s.series[series] {
		if st := k.time(); !st.Before(from) && st.Before(to) {
			out = append(out, tablets.Point{Time: st, Value: v})
		}
	}
	slices.SortFunc(out, func(a, b tablets.Point) int { return a.Time.Compare(b.Time) })
	return out
}

func (s *memStore) Query(ctx context.Context, series string, from, to time.Time) iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		if err := checkSeries(series); err != nil {
			yield(tablets.Point{}, err)
			return
		}
		if err := checkRange(from, to); err != nil {
			yield(tablets.Point{}, err)
			return
		}
		s.ops.Add(1)
		if err := ctx.Err(); err != nil {
			yield(tablets.Point{}, err)
			return
		}
		for _, p := range s.read(series, from, to) {
			if !yield(p, nil) {
				return
			}
		}
	}
}

// A token is 12 bytes of the last returned stored time (seconds, nanoseconds) and 8 bytes
// of a checksum binding it to series, from and to; base64url without padding, strict.
var tokenEncoding = base64.RawURLEncoding.Strict()

func tokenSum(series string, from, to time.Time, payload []byte) []byte {
	h := sha256.New()
	fmt.Fprintf(h, "memstore\x00%s\x00%d.%d\x00%d.%d\x00", series, from.Unix(), from.Nanosecond(), to.Unix(), to.Nanosecond())
	h.Write(payload)
	return h.Sum(nil)[:8]
}

func makeToken(series string, from, to, last time.Time) string {
	payload := binary.BigEndian.AppendUint64(nil, uint64(last.Unix()))
	payload = binary.BigEndian.AppendUint32(payload, uint32(last.Nanosecond()))
	return tokenEncoding.EncodeToString(append(payload, tokenSum(series, from, to, payload)...))
}

func parseToken(token, series string, from, to time.Time) (time.Time, error) {
	raw, err := tokenEncoding.DecodeString(token)
	if err != nil || len(raw) != 20 {
		return time.Time{}, fmt.Errorf("%w: malformed", tablets.ErrInvalidToken)
	}
	payload, sum := raw[:12], raw[12:]
	if !bytes.Equal(sum, tokenSum(series, from, to, payload)) {
		return time.Time{}, fmt.Errorf("%w: not issued for this query", tablets.ErrInvalidToken)
	}
	sec, nsec := int64(binary.BigEndian.Uint64(payload)), int64(binary.BigEndian.Uint32(payload[8:]))
	return time.Unix(sec, nsec).UTC(), nil
}

func (s *memStore) QueryPage(ctx context.Context, series string, from, to time.Time, limit int, token string) (tablets.Page, error) {
	if err := checkSeries(series); err != nil {
		return tablets.Page{}, err
	}
	if err := checkRange(from, to); err != nil {
		return tablets.Page{}, err
	}
	if limit <= 0 {
		return tablets.Page{}, fmt.Errorf("%w: limit %d", tablets.ErrInvalidLimit, limit)
	}
	var last time.Time
	if token != "" {
		var err error
		if last, err = parseToken(token, series, from, to); err != nil {
			return tablets.Page{}, err
		}
	}
	s.ops.Add(1)
	if err := ctx.Err(); err != nil {
		return tablets.Page{}, err
	}
	all := s.read(series, from, to)
	if token != "" {
		all = after(all, last)
	}
	if len(all) <= limit {
		return tablets.Page{Points: all}, nil
	}
	page := all[:limit]
	return tablets.Page{Points: page, Next: makeToken(series, from, to, page[limit-1].Time)}, nil
}

func (s *memStore) QueryMany(ctx context.Context, series []string, from, to time.Time) iter.Seq2[tablets.SeriesPoint, error] {
	return func(yield func(tablets.SeriesPoint, error) bool) {
		for _, name := range series {
			if err := checkSeries(name); err != nil {
				yield(tablets.SeriesPoint{}, err)
				return
			}
		}
		if err := checkRange(from, to); err != nil {
			yield(tablets.SeriesPoint{}, err)
			return
		}
		if len(series) == 0 {
			return
		}
		s.ops.Add(1)
		if err := ctx.Err(); err != nil {
			yield(tablets.SeriesPoint{}, err)
			return
		}
		seen := map[string]bool{}
		for _, name := range series {
			if seen[name] {
				continue
			}
			seen[name] = true
			for _, p := range s.read(name, from, to) {
				if !yield(tablets.SeriesPoint{Series: name, Point: p}, nil) {
					return
				}
			}
		}
	}
}

func (s *memStore) Latest(ctx context.Context, series string, n int) ([]tablets.Point, error) {
	if err := checkSeries(series); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: n %d", tablets.ErrInvalidLimit, n)
	}
	s.ops.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all := s.read(series, tablets.MinTime, tablets.MaxTime)
	if p, ok := s.at(series, tablets.MaxTime); ok { // the range above excludes MaxTime itself
		all = append(all, p)
	}
	slices.Reverse(all)
	return all[:min(n, len(all))], nil
}

func (s *memStore) at(series string, t time.Time) (tablets.Point, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.series[series][keyOf(t)]
	return tablets.Point{Time: t, Value: v}, ok
}

func (s *memStore) Delete(ctx context.Context, series string, from, to time.Time) error {
	if err := checkSeries(series); err != nil {
		return err
	}
	if err := checkRange(from, to); err != nil {
		return err
	}
	s.ops.Add(1)
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.series[series] {
		if st := k.time(); !st.Before(from) && st.Before(to) {
			delete(s.series[series], k)
		}
	}
	return nil
}

type memHarness struct{ r time.Duration }

func (h memHarness) NewStore(t *testing.T) (tablets.Store, func() int64) {
	s := newMemStore(h.r)
	return s, s.ops.Load
}

func (h memHarness) Resolution() time.Duration { return h.r }
func (h memHarness) Name() string              { return "memstore-" + h.r.String() }

func TestConformanceMemStore(t *testing.T) {
	for _, r := range []time.Duration{time.Millisecond, time.Second, 7 * time.Second, time.Nanosecond} {
		RunConformanceTests(t, memHarness{r: r})
	}
}
