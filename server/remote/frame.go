package remote

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"net/http"
)

// castagnoli is the CRC-32 table of streamed remote-read frames.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameWriter writes the frames of a streamed remote-read response, as Prometheus'
// ChunkedWriter does: the data's length as a uvarint, the CRC-32 (Castagnoli) of the data
// as a big-endian uint32, then the data; flushed after each frame, so that the client can
// decode a series while the next is read from storage.
type frameWriter struct {
	w       io.Writer
	flusher http.Flusher // nil: not flushed
	buf     []byte
	started bool // a frame was written: the status is sent
}

func (fw *frameWriter) write(data []byte) error {
	fw.buf = binary.AppendUvarint(fw.buf[:0], uint64(len(data)))
	fw.buf = binary.BigEndian.AppendUint32(fw.buf, crc32.Checksum(data, castagnoli))
	fw.buf = append(fw.buf, data...)
	fw.started = true
	if _, err := fw.w.Write(fw.buf); err != nil {
		return err
	}
	if fw.flusher != nil {
		fw.flusher.Flush()
	}
	return nil
}
