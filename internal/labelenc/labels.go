package labelenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Version is the first byte of an encoded label set.
const Version = 1

// MaxSize is the largest encoded label set: Azure's limit on an Edm.Binary property.
const MaxSize = 64 << 10

// Label is one name and value. The functions take any type of the same fields, such as the
// tsdb package's Label.
type Label struct{ Name, Value string }

// ErrInvalid is wrapped by the errors of Decode on bytes that are not a set's encoding.
var ErrInvalid = errors.New("malformed label set")

// Append appends the encoding of a label set that is valid (names non-empty, strictly
// ascending bytewise, values non-empty: [Check] reports otherwise) to dst. Of an invalid
// set it appends bytes that Decode rejects.
func Append[L ~struct{ Name, Value string }](dst []byte, ls []L) []byte {
	dst = append(dst, Version)
	dst = binary.AppendUvarint(dst, uint64(len(ls)))
	for _, x := range ls {
		l := Label(x)
		dst = binary.AppendUvarint(dst, uint64(len(l.Name)))
		dst = append(dst, l.Name...)
		dst = binary.AppendUvarint(dst, uint64(len(l.Value)))
		dst = append(dst, l.Value...)
	}
	return dst
}

// Size is len(Append(nil, ls)).
func Size[L ~struct{ Name, Value string }](ls []L) int {
	n := 1 + uvarintLen(len(ls))
	for _, x := range ls {
		l := Label(x)
		n += uvarintLen(len(l.Name)) + len(l.Name) + uvarintLen(len(l.Value)) + len(l.Value)
	}
	return n
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// Check reports why a set cannot be encoded, or nil: empty, a name or value empty or not
// UTF-8, names not strictly ascending, or over MaxSize bytes encoded.
func Check[L ~struct{ Name, Value string }](ls []L) error {
	if len(ls) == 0 {
		return errors.New("empty label set")
	}
	for i, x := range ls {
		l := Label(x)
		switch {
		case l.Name == "":
			return fmt.Errorf("label %d has an empty name", i)
		case !utf8.ValidString(l.Name):
			return fmt.Errorf("label name %q is not valid UTF-8", l.Name)
		case !utf8.ValidString(l.Value):
			return fmt.Errorf("the value of label %q is not valid UTF-8", l.Name)
		case l.Value == "":
			return fmt.Errorf("label %q has an empty value (an empty value is no label)", l.Name)
		case i > 0 && Label(ls[i-1]).Name == l.Name:
			return fmt.Errorf("duplicate label name %q", l.Name)
		case i > 0 && Label(ls[i-1]).Name > l.Name:
			return fmt.Errorf("labels not sorted by name (%q before %q)", Label(ls[i-1]).Name, l.Name)
		}
	}
	if size := Size(ls); size > MaxSize {
		return fmt.Errorf("the label set takes %d bytes, over %d", size, MaxSize)
	}
	return nil
}

// Decode decodes Append's encoding strictly: anything but the one encoding of a valid set is
// an error wrapping ErrInvalid.
func Decode[L ~struct{ Name, Value string }](b []byte) ([]L, error) {
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalid, len(b))
	}
	if len(b) == 0 || b[0] != Version {
		return nil, fmt.Errorf("%w: unknown version", ErrInvalid)
	}
	whole := b
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad count", ErrInvalid)
	}
	b = b[k:]
	str := func() (string, bool) {
		l, k := binary.Uvarint(b)
		if k <= 0 || l == 0 || l > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(l)])
		b = b[k+int(l):]
		return s, true
	}
	ls := make([]L, 0, n)
	for range n {
		name, ok1 := str()
		value, ok2 := str()
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: truncated", ErrInvalid)
		}
		ls = append(ls, L(Label{name, value}))
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last label", ErrInvalid, len(b))
	}
	if err := Check(ls); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// A non-minimal uvarint would decode to the same set: one encoding only.
	if string(Append(nil, ls)) != string(whole) {
		return nil, fmt.Errorf("%w: not the canonical encoding", ErrInvalid)
	}
	return ls, nil
}
