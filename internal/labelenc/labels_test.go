package labelenc

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeRejects(t *testing.T) {
	good := Append(nil, []Label{{"a", "1"}, {"b", "2"}})
	for name, b := range map[string][]byte{
		"empty":        {},
		"version 2":    append([]byte{2}, good[1:]...),
		"no labels":    {1, 0},
		"truncated":    good[:len(good)-1],
		"trailing":     append(slices.Clone(good), 0),
		"unsorted":     Append(nil, []Label{{"b", "2"}, {"a", "1"}}),
		"empty value":  Append(nil, []Label{{"a", ""}}),
		"non-minimal":  {1, 0x81, 0x00, 1, 'a', 1, '1'},
		"huge count":   {1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bad UTF-8":    Append(nil, []Label{{"a", "\xff"}}),
		"length > all": {1, 1, 5, 'a'},
	} {
		_, err := Decode[Label](b)
		require.ErrorIs(t, err, ErrInvalid, name)
	}
}

// FuzzDecodeLabels: decoding never panics, and what decodes encodes back to the same bytes.
func FuzzDecodeLabels(f *testing.F) {
	f.Add(Append(nil, []Label{{"__name__", "up"}, {"job", "api"}}))
	f.Add(Append(nil, []Label{{"a", "/\\#?'\x00\n"}}))
	f.Add([]byte{1, 0x81, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		ls, err := Decode[Label](b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if got := Append(nil, ls); string(got) != string(b) {
			t.Fatalf("decoded %v re-encodes to %x, not %x", ls, got, b)
		}
	})
}

// Size is the length of the encoding; Check accepts exactly what Decode would.
func TestSizeCheck(t *testing.T) {
	for _, ls := range [][]Label{
		{{"a", "1"}},
		{{"__name__", "up"}, {"job", "api"}},
		{{"a", strings.Repeat("é", 20000)}},
		{{"a", strings.Repeat("x", MaxSize-6)}}, // 1 + 1 + 1 + 1 + 3 + MaxSize-6 : one over
		{{"a", strings.Repeat("x", MaxSize-7)}},
		{{"b", "1"}, {"a", "2"}},
		{{"a", "1"}, {"a", "2"}},
		{{"a", ""}},
		{{"", "a"}},
		{{"a", "\xff"}},
		{},
	} {
		b := Append(nil, ls)
		if Size(ls) != len(b) {
			t.Errorf("Size %d, encoding %d bytes", Size(ls), len(b))
		}
		_, decErr := Decode[Label](b)
		if checkErr := Check(ls); (checkErr == nil) != (decErr == nil) {
			t.Errorf("%d labels of %d bytes: Check says %v, Decode %v", len(ls), len(b), checkErr, decErr)
		}
	}
}
