package pager

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/seed71701133/tablets"
)

// The page tokens of every store share one envelope (docs/format.md, "Page tokens"):
//
//	version (1 byte) | binding (8 bytes) | fields (uvarints) | CRC-32 IEEE of what precedes (4 bytes, big-endian)
//
// in unpadded URL-safe base64. Each issuer owns a version byte and says what its fields mean:
// the layouts' tokens (Token) are version 2 with one field; tsdb's are version 1 with two.

var tokenEncoding = base64.RawURLEncoding.Strict()

// EncodeFields returns the token of version with binding and fields.
func EncodeFields(version byte, binding [8]byte, fields ...uint64) string {
	b := append([]byte{version}, binding[:]...)
	for _, f := range fields {
		b = binary.AppendUvarint(b, f)
	}
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	return tokenEncoding.EncodeToString(b)
}

// DecodeFields parses a token of version with binding and exactly n fields. A token has one
// spelling: anything EncodeFields would not have written (line breaks, which base64 decoding
// skips, padding, non-minimal uvarints, a bad checksum, another version or binding) gives an
// error wrapping tablets.ErrInvalidToken.
func DecodeFields(s string, version byte, binding [8]byte, n int) ([]uint64, error) {
	bad := func(why string) ([]uint64, error) {
		return nil, fmt.Errorf("%w: %s", tablets.ErrInvalidToken, why)
	}
	if strings.ContainsAny(s, "\r\n") {
		return bad("not a token")
	}
	b, err := tokenEncoding.DecodeString(s)
	if err != nil || len(b) < 1+8+n+4 {
		return bad("not a token")
	}
	body, sum := b[:len(b)-4], b[len(b)-4:]
	if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(sum) {
		return bad("checksum mismatch (truncated or altered)")
	}
	if body[0] != version {
		return bad(fmt.Sprintf("version %d (issued by another version of this library)", body[0]))
	}
	if !bytes.Equal(body[1:9], binding[:]) {
		return bad("issued by another query (series, range or store)")
	}
	fields := make([]uint64, 0, n)
	rest := body[9:]
	for range n {
		f, k := binary.Uvarint(rest)
		if k <= 0 || k != len(binary.AppendUvarint(nil, f)) {
			return bad("malformed")
		}
		fields = append(fields, f)
		rest = rest[k:]
	}
	if len(rest) != 0 {
		return bad("malformed")
	}
	return fields, nil
}

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

// Encode returns the token as an opaque URL-safe string (version 2, one field: After).
func (t Token) Encode() string { return EncodeFields(tokenVersion, t.Binding, t.After) }

// DecodeToken parses a token and checks that it was issued by the query with this binding
// and that it resumes inside [from, to). Any malformed, tampered, old or foreign token gives
// an error wrapping tablets.ErrInvalidToken.
func DecodeToken(s string, binding [8]byte, from, to uint64) (Token, error) {
	f, err := DecodeFields(s, tokenVersion, binding, 1)
	if err != nil {
		return Token{}, err
	}
	if f[0] <= from || f[0] > to {
		return Token{}, fmt.Errorf("%w: resume position outside the query's range", tablets.ErrInvalidToken)
	}
	return Token{Binding: binding, After: f[0]}, nil
}
