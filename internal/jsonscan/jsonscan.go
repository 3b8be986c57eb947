// Package jsonscan scans JSON in place, without decoding it: the shared steps of the
// entity decoder (package entity) and of the split of a query's reply into its entities
// (internal/reply). Each function takes the input and a position and returns where the
// thing read there ends.
package jsonscan

import (
	"bytes"
	"errors"
	"strings"
)

// ErrSyntax is malformed JSON where no more precise reason applies.
var ErrSyntax = errors.New("malformed JSON")

// Number returns the end of the JSON number at d[i] and whether it follows the grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func Number(d []byte, i int) (int, bool) {
	digits := func(j int) int {
		for j < len(d) && d[j] >= '0' && d[j] <= '9' {
			j++
		}
		return j
	}
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(i)
	default:
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

// Space returns the position of the first byte at or after d[i] that is not JSON white space.
func Space(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// Hex4 reads the four hex digits of a \u escape at d[i].
func Hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Value skips the JSON value at d[i]: a string, number or literal checked strictly, an
// object or array by its brackets and strings only (Strict checks those too).
func Value(d []byte, i int) (int, error) {
	if i >= len(d) {
		return i, ErrSyntax
	}
	switch c := d[i]; {
	case c == '"':
		for j := i + 1; j < len(d); j++ {
			switch {
			case d[j] == '\\':
				if j+1 >= len(d) || !strings.ContainsRune(`"\\/bfnrtu`, rune(d[j+1])) {
					return j, errors.New("bad escape")
				}
				if d[j+1] == 'u' {
					if _, ok := Hex4(d, j+2); !ok {
						return j, errors.New("bad \\u escape")
					}
				}
				j++
			case d[j] == '"':
				return j + 1, nil
			case d[j] < 0x20:
				return j, errors.New("control character in a string")
			}
		}
		return len(d), errors.New("unterminated string")
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(d); j++ {
			switch d[j] {
			case '"':
				k, err := Value(d, j)
				if err != nil {
					return k, err
				}
				j = k - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return len(d), errors.New("unterminated object")
	case c == 't' && bytes.HasPrefix(d[i:], []byte("true")):
		return i + 4, nil
	case c == 'f' && bytes.HasPrefix(d[i:], []byte("false")):
		return i + 5, nil
	case c == 'n' && bytes.HasPrefix(d[i:], []byte("null")):
		return i + 4, nil
	case c == '-' || (c >= '0' && c <= '9'):
		j, ok := Number(d, i)
		if !ok {
			return j, ErrSyntax
		}
		return j, nil
	}
	return i, ErrSyntax
}

// MaxDepth bounds the nesting Strict follows: an entity is flat (depth 1), and a reply
// nested deeper is no reply of the service.
const MaxDepth = 16

// Strict checks the JSON value at d[i], nested depth deep already, as encoding/json would
// accept it (FuzzSplitReply compares them), and returns where it ends.
func Strict(d []byte, i, depth int) (int, bool) {
	if i >= len(d) {
		return i, false
	}
	switch d[i] {
	case '{', '[':
		if depth >= MaxDepth {
			return i, false
		}
		object := d[i] == '{'
		closer := byte(']')
		if object {
			closer = '}'
		}
		i = Space(d, i+1)
		if i < len(d) && d[i] == closer {
			return i + 1, true
		}
		for {
			var ok bool
			if object {
				if i >= len(d) || d[i] != '"' {
					return i, false
				}
				if i, ok = Strict(d, i, depth+1); !ok {
					return i, false
				}
				i = Space(d, i)
				if i >= len(d) || d[i] != ':' {
					return i, false
				}
				i = Space(d, i+1)
			}
			if i, ok = Strict(d, i, depth+1); !ok {
				return i, false
			}
			i = Space(d, i)
			if i >= len(d) {
				return i, false
			}
			if d[i] == closer {
				return i + 1, true
			}
			if d[i] != ',' {
				return i, false
			}
			i = Space(d, i+1)
		}
	case '"', 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		end, err := Value(d, i)
		return end, err == nil
	}
	return i, false
}
