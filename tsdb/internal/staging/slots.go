package staging

import "unique"

// seriesSlots numbers the float series a read collects staged points of, and holds each
// one's points in its slot: a refresh of a panel over a thousand series takes the staged
// points of a hundred entities from the cache, and looking each series up in a map by its
// key (hashing and comparing the string), once an entity, was a quarter of its staging
// read's CPU. The cache's entities name their series by interned key (seriesPack), which
// handles looks up by pointer; an entity assembled from the cache carries its series'
// slots (Decoded.Slots).
type seriesSlots struct {
	all     bool // every series read: a key not seen yet gets a slot
	keys    []string
	index   map[string]int32
	handles map[unique.Handle[string]]int32 // index by interned key: made by byHandle
	points  [][]Point
}

// newSeriesSlots numbers series, distinct keys in order (nil: every series read, numbered
// as they come).
func newSeriesSlots(series []string) *seriesSlots {
	s := &seriesSlots{all: series == nil, index: make(map[string]int32, len(series))}
	for _, key := range series {
		if _, dup := s.index[key]; !dup {
			s.add(key)
		}
	}
	return s
}

// slot is key's slot; false when the read did not ask for key.
func (s *seriesSlots) slot(key string) (int32, bool) {
	if i, ok := s.index[key]; ok {
		return i, true
	}
	if !s.all {
		return 0, false
	}
	return s.add(key), true
}

// add gives key the next slot.
func (s *seriesSlots) add(key string) int32 {
	i := int32(len(s.keys))
	s.index[key] = i
	s.keys = append(s.keys, key)
	s.points = append(s.points, nil)
	return i
}

// byHandle is the slots by interned key, nil when every series is read (the cache's
// entities then yield all theirs).
func (s *seriesSlots) byHandle() map[unique.Handle[string]]int32 {
	if s.all {
		return nil
	}
	if s.handles == nil {
		s.handles = make(map[unique.Handle[string]]int32, len(s.keys))
		for i, key := range s.keys {
			s.handles[unique.Make(key)] = int32(i)
		}
	}
	return s.handles
}

// found is the points collected, by series: those with any.
func (s *seriesSlots) found() map[string][]Point {
	out := make(map[string][]Point, len(s.keys))
	for i, pts := range s.points {
		if len(pts) > 0 {
			out[s.keys[i]] = pts
		}
	}
	return out
}
