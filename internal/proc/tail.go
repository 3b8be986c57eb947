package proc

import (
	"bytes"
	"sync"
)

// Tail is an io.Writer that keeps the last bytes written to it, at most the bound given to
// [NewTail]. It is safe for concurrent use.
type Tail struct {
	mu      sync.Mutex
	max     int
	buf     bytes.Buffer
	dropped bool // bytes before buf's were written and dropped
}

// NewTail returns a Tail that keeps the last limit bytes (at least 1).
func NewTail(limit int) *Tail {
	return &Tail{max: max(limit, 1)}
}

// Write keeps p, dropping the oldest bytes beyond the bound. It never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	// Compact at twice the bound, so that a stream of small writes copies each byte O(1) times.
	if t.buf.Len() > 2*t.max {
		keep := t.buf.Bytes()[t.buf.Len()-t.max:]
		nb := make([]byte, len(keep), 2*t.max)
		copy(nb, keep)
		t.buf = *bytes.NewBuffer(nb)
		t.dropped = true
	}
	return len(p), nil
}

// String returns the bytes kept, prefixed with "..." if earlier ones were dropped.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.buf.Bytes()
	if len(s) > t.max {
		return "..." + string(s[len(s)-t.max:])
	}
	if t.dropped {
		return "..." + string(s)
	}
	return string(s)
}

// Contains reports whether the bytes kept contain s.
func (t *Tail) Contains(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf.Bytes()
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return bytes.Contains(b, []byte(s))
}
