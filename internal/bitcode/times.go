package bitcode

// Times are coded the same way in both codecs.

// MeanDelta is D, the reference delta of order-1 times: (last-first)/(count-1), rounded
// down. A reader computes it from the header alone.
func MeanDelta(count int, first, last uint64) uint64 {
	if count < 2 {
		return 0
	}
	return (last - first) / uint64(count-1)
}

// TimeCoder predicts each time delta as D (order 1) or as the previous delta (order 2, the
// first prediction being D); the residual, wrapping mod 2^64, is zigzagged and Rice-coded.
type TimeCoder struct {
	order2 bool
	ref    uint64
	S      Adaptive
}

// NewTimeCoder returns the coder of a chunk of count times from first to last.
func NewTimeCoder(order2 bool, count int, first, last uint64) TimeCoder {
	return TimeCoder{order2: order2, ref: MeanDelta(count, first, last), S: NewAdaptive()}
}

// Residual returns the zigzagged residual of the next delta and advances the prediction.
func (c *TimeCoder) Residual(delta uint64) uint64 {
	z := Zigzag(int64(delta - c.ref))
	if c.order2 {
		c.ref = delta
	}
	return z
}

// Write writes the next delta.
func (c *TimeCoder) Write(w *Writer, delta uint64) {
	c.S.Write(w, c.Residual(delta))
}

// Read reads the next delta.
func (c *TimeCoder) Read(r *Reader) uint64 {
	z := c.S.Read(r)
	delta := c.ref + uint64(Unzigzag(z))
	if c.order2 {
		c.ref = delta
	}
	return delta
}
