package bitcode

// LastFit returns n in [lo, hi) with fits(n) (or n == lo) and !fits(n+1), given that
// fits(lo) holds (or lo is 0) and fits(hi) does not (or hi is one past the last count). It
// gallops from guess to bracket the boundary and bisects the bracket, calling fits with
// counts in (lo, hi) only; the last call of fits that returned true is for n.
func LastFit(lo, hi, guess int, fits func(int) bool) int {
	if hi-lo <= 1 {
		return lo
	}
	guess = min(max(guess, lo+1), hi-1)
	if fits(guess) {
		lo = guess
		for step := 1; lo+step < hi; step *= 2 {
			if !fits(lo + step) {
				hi = lo + step
				break
			}
			lo += step
		}
	} else {
		hi = guess
		for step := 1; hi-step > lo; step *= 2 {
			if fits(hi - step) {
				lo = hi - step
				break
			}
			hi -= step
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
