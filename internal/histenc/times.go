package histenc

// Times are coded as in internal/chunkenc (copied, as its format must not change with this
// one's).

// meanDelta is D, the reference delta of order-1 times: (last-first)/(count-1), rounded
// down. A reader computes it from the header alone.
func meanDelta(count int, first, last uint64) uint64 {
	if count < 2 {
		return 0
	}
	return (last - first) / uint64(count-1)
}

// timeCoder predicts each time delta as D (order 1) or as the previous delta (order 2, the
// first prediction being D); the residual, wrapping mod 2^64, is zigzagged and Rice-coded.
type timeCoder struct {
	order2 bool
	ref    uint64
	s      adaptive
}

func newTimeCoder(order2 bool, count int, first, last uint64) timeCoder {
	return timeCoder{order2: order2, ref: meanDelta(count, first, last), s: newAdaptive()}
}

func (c *timeCoder) residual(delta uint64) uint64 {
	z := zigzag(int64(delta - c.ref))
	if c.order2 {
		c.ref = delta
	}
	return z
}

func (c *timeCoder) write(w *bitWriter, delta uint64) {
	c.s.write(w, c.residual(delta))
}

func (c *timeCoder) read(r *bitReader) uint64 {
	z := c.s.read(r)
	delta := c.ref + uint64(unzigzag(z))
	if c.order2 {
		c.ref = delta
	}
	return delta
}
