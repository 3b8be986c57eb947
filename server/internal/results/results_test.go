package results

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cache holds at most its size, dropping the least recently used first; a Get makes an
// entry the most recently used; a Put of a key replaces its value and its bytes.
func TestCacheBoundsAndEviction(t *testing.T) {
	c := New(800)
	for i := range 8 {
		c.Put(i, i, 100)
	}
	require.Equal(t, Stats{Entries: 8, Bytes: 800}, c.Stats())
	_, ok := c.Get(0) // 0 is now the most recently used: 1 goes first
	require.True(t, ok)
	c.Put(8, 8, 100)
	_, ok = c.Get(1)
	require.False(t, ok, "the least recently used was dropped")
	for _, k := range []int{0, 2, 8} {
		v, ok := c.Get(k)
		require.True(t, ok, "key %d", k)
		require.Equal(t, k, v)
	}
	c.Put(2, "two", 50) // replaces: its bytes too
	require.Equal(t, Stats{Entries: 8, Bytes: 750}, c.Stats())
	v, _ := c.Get(2)
	require.Equal(t, "two", v)
	c.Put(9, 9, 100) // 850 > 800: the least recently used goes (3)
	require.Equal(t, Stats{Entries: 8, Bytes: 750}, c.Stats())
	_, ok = c.Get(3)
	require.False(t, ok)

	c.Remove(9)
	require.Equal(t, Stats{Entries: 7, Bytes: 650}, c.Stats())
}

// A value of more than an eighth of the cache is not kept, and drops the value its key had.
func TestCacheRefusesHugeValues(t *testing.T) {
	c := New(800)
	c.Put("a", 1, 100)
	c.Put("b", 2, 50)
	c.Put("a", 3, 101)
	_, ok := c.Get("a")
	require.False(t, ok)
	require.Equal(t, Stats{Entries: 1, Bytes: 50}, c.Stats())

	none := New(0)
	none.Put("a", 1, 0)
	none.Put("b", 1, 1)
	_, ok = none.Get("b")
	require.False(t, ok, "a cache of 0 bytes keeps nothing of a byte")
}

// Hits and misses are what the callers count.
func TestCacheCounts(t *testing.T) {
	c := New(1 << 10)
	c.Put("a", 1, 10)
	_, _ = c.Get("a")
	_, _ = c.Get("b")
	c.Hit()
	c.Miss()
	c.Miss()
	st := c.Stats()
	require.Equal(t, uint64(1), st.Hits)
	require.Equal(t, uint64(2), st.Misses)
}

// Concurrent Puts, Gets and Removes (run with -race) keep the accounting: the bytes held
// are the sum of the entries' and never over the size.
func TestCacheConcurrent(t *testing.T) {
	c := New(10_000)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprint((g*7 + i) % 300)
				switch i % 4 {
				case 0, 1:
					c.Put(k, i, int64(1+i%100))
				case 2:
					if v, ok := c.Get(k); ok {
						_ = v.(int)
						c.Hit()
					} else {
						c.Miss()
					}
				case 3:
					c.Remove(k)
				}
			}
		})
	}
	wg.Wait()
	st := c.Stats()
	require.LessOrEqual(t, st.Bytes, int64(10_000))
	var sum int64
	c.mu.Lock()
	for e := c.lru.Front(); e != nil; e = e.Next() {
		sum += e.Value.(*entry).bytes
	}
	require.Equal(t, len(c.byKey), c.lru.Len())
	c.mu.Unlock()
	require.Equal(t, st.Bytes, sum)
	require.Equal(t, uint64(8*500), st.Hits+st.Misses)
}
