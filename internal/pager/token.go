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

const tokenVersion = 1

// Token is a resume position: the sub-query of the plan, the service's continuation that
// fetched the page holding the last point returned, and the time (in resolution units) the
// next point must be at or after. It is bound to the query that issued it.
type Token struct {
	Binding          [8]byte
	Query            int
	NextPartitionKey string
	NextRowKey       string
	After            uint64
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

// Encode returns the token as an opaque URL-safe string.
func (t Token) Encode() string {
	b := []byte{tokenVersion}
	b = append(b, t.Binding[:]...)
	b = binary.AppendUvarint(b, uint64(t.Query))
	b = binary.AppendUvarint(b, t.After)
	b = binary.AppendUvarint(b, uint64(len(t.NextPartitionKey)))
	b = append(b, t.NextPartitionKey...)
	b = binary.AppendUvarint(b, uint64(len(t.NextRowKey)))
	b = append(b, t.NextRowKey...)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	return tokenEncoding.EncodeToString(b)
}

// DecodeToken parses a token and checks that it was issued by the query with this binding.
// Any malformed, tampered or foreign token gives an error wrapping tablets.ErrInvalidToken.
func DecodeToken(s string, binding [8]byte, queries int) (Token, error) {
	bad := func(why string) (Token, error) {
		return Token{}, fmt.Errorf("%w: %s", tablets.ErrInvalidToken, why)
	}
	b, err := tokenEncoding.DecodeString(s)
	if err != nil || len(b) < 1+8+4 {
		return bad("not a token")
	}
	body, sum := b[:len(b)-4], b[len(b)-4:]
	if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(sum) {
		return bad("checksum mismatch (truncated or altered)")
	}
	if body[0] != tokenVersion {
		return bad(fmt.Sprintf("version %d", body[0]))
	}
	var t Token
	copy(t.Binding[:], body[1:9])
	if !bytes.Equal(t.Binding[:], binding[:]) {
		return bad("issued by another query (series, range or store layout)")
	}
	r := bytes.NewReader(body[9:])
	query, err1 := binary.ReadUvarint(r)
	after, err2 := binary.ReadUvarint(r)
	pk, err3 := readString(r)
	rk, err4 := readString(r)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || r.Len() != 0 {
		return bad("malformed")
	}
	if query >= uint64(queries) {
		return bad("sub-query out of range")
	}
	t.Query, t.After, t.NextPartitionKey, t.NextRowKey = int(query), after, pk, rk
	return t, nil
}

func readString(r *bytes.Reader) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil || n > uint64(r.Len()) {
		return "", fmt.Errorf("bad length")
	}
	b := make([]byte, n)
	_, _ = r.Read(b)
	return string(b), nil
}
