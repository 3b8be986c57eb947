// Package bitcode holds the bit-level coding shared by the chunk codecs internal/chunkenc
// (float points) and internal/histenc (native histograms): a bit writer and reader, an
// adaptive Golomb-Rice coder, the time coder, the decimal (scaled integer) and XOR value
// coders, and the LastFit search of their size-limited encoders.
//
// Both codecs' storage formats depend on this code byte for byte: any change to what it
// writes or accepts changes stored chunks. Their golden and format tests (TestFormatDoc,
// TestGolden) and fuzz corpora guard it; the formats are specified in docs/format.md.
package bitcode
