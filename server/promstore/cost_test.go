package promstore

// paths is st without the cost estimates: the paths the Selects took and what they read.
func paths(st Stats) Stats {
	st.EstimatedRawBytes, st.EstimatedTierBytes, st.SamplesPerSecond = 0, 0, 0
	return st
}
