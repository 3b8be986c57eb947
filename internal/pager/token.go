package pager

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/seed71701133/tablets"
)

// tokenVersion 2 holds only the resume time: a page resumes with a fresh query from there,
// so it never downloads again the service page that held the previous page's last point
// (version 1 resumed from that page's continuation, and paid for it on every call).
// Version 1 tokens are rejected with ErrInvalidToken.
const tokenVersion = 2

// Token is a resume position: the time (in resolution units) the next point must be at or
// after. It is bound to the query that issued it.
type Token struct {
	Binding [8]byte
	After   uint64
}

var tokenEncoding = base64.RawURLEncoding.Strict()

// Bind returns the binding of a query: layout, series and range. A token only resumes the
// query whose binding it carries.
func Bind(layoutID, series string, from, to uint64) [8]byte {
	h := sha256.New()
	var buf [binary.MaxVarintLen64]byte
	for _, part := range []string{layoutID, series} {
		h.Write(buf[:binary.PutUvarint(buf[:], uint64(len(part)))])
		h.Write([]byte(part))
	}
	h.Write(buf[:binary.PutUvarint(buf[:], from)])
	h.Write(buf[:binary.PutUvarint(buf[:], to)])
	var b [8]byte
	copy(b[:], h.Sum(nil))
	return b
}

// Encode returns the token as an opaque URL-safe string: version, binding, uvarint After,
// CRC-32 (IEEE, big-endian) of what precedes it.
func (t Token) Encode() string {
	b := []byte{tokenVersion}
	b = append(b, t.Binding[:]...)
	b = binary.AppendUvarint(b, t.After)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	return tokenEncoding.EncodeToString(b)
}

// DecodeToken parses a token and checks that it was issued by the query with this binding
// and that it resumes inside [from, to). Any malformed, tampered, old or foreign token gives
// an error wrapping tablets.ErrInvalidToken.
func DecodeToken(s string, binding [8]byte, from, to uint64) (Token, error) {
	bad := func(why string) (Token, error) {
		return Token{}, fmt.Errorf("%w: %s", tablets.ErrInvalidToken, why)
	}
	b, err := tokenEncoding.DecodeString(s)
	if err != nil || len(b) < 1+8+1+4 {
		return bad("not a token")
	}
	body, sum := b[:len(b)-4], b[len(b)-4:]
	if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(sum) {
		return bad("checksum mismatch (truncated or altered)")
	}
	if body[0] != tokenVersion {
		return bad(fmt.Sprintf("version %d (issued by another version of this library)", body[0]))
	}
	var t Token
	copy(t.Binding[:], body[1:9])
	if !bytes.Equal(t.Binding[:], binding[:]) {
		return bad("issued by another query (series, range or store layout)")
	}
	after, n := binary.Uvarint(body[9:])
	if n <= 0 || 9+n != len(body) {
		return bad("malformed")
	}
	if after <= from || after > to {
		return bad("resume position outside the query's range")
	}
	t.After = after
	return t, nil
}
