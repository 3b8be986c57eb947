package entity

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/seed71701133/tablets/internal/jsonscan"
)

// Prop is one Double property of a decoded entity.
type Prop struct {
	Name  []byte
	Value float64
}

// Entity is a decoded entity. Its byte slices alias the input of Decode, or a buffer of the
// Entity's own where the input held escapes; they are valid until the next Decode.
type Entity struct {
	PartitionKey []byte
	RowKey       []byte
	ETag         []byte
	// Props holds the entity's Double properties in the order they appear. Unless
	// AllowStrings is set, every user property must be a Double.
	Props []Prop
	// AllowStrings makes Decode keep string-valued properties (Edm.String, and Edm.Binary in
	// its base64 form) in Strings instead of rejecting them.
	AllowStrings bool
	Strings      []StringProp
	// AllowNull makes Decode skip a property whose value is null: what the service answers
	// for a property named in a $select that the entity lacks. Otherwise null is malformed
	// (a reply that lost a value must not read as an entity without it).
	AllowNull bool

	scratch []byte // unescaped strings
}

// StringProp is one string property of a decoded entity (Entity.AllowStrings): its JSON
// string unescaped; an Edm.Binary's is base64.
type StringProp struct {
	Name  []byte
	Value []byte
}

// String returns the value of the string property named name, and whether there is one.
func (e *Entity) String(name string) ([]byte, bool) {
	for _, p := range e.Strings {
		if string(p.Name) == name {
			return p.Value, true
		}
	}
	return nil, false
}

// DecodeError is a malformed entity: bad JSON, or a property that is not a Double.
type DecodeError struct {
	PartitionKey, RowKey string
	Reason               string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("entity: PartitionKey %q RowKey %q: %s", e.PartitionKey, e.RowKey, e.Reason)
}

// Decode parses one entity's JSON (as aztables returns it) into e, reusing e's storage.
func (e *Entity) Decode(data []byte) error {
	e.PartitionKey, e.RowKey, e.ETag = nil, nil, nil
	e.Props = e.Props[:0]
	e.Strings = e.Strings[:0]
	e.scratch = e.scratch[:0]
	// Unescaped strings are appended to scratch; reserve enough that it never moves while
	// earlier slices point into it.
	if cap(e.scratch) < len(data) {
		e.scratch = make([]byte, 0, len(data))
	}
	reason := e.decode(data)
	if reason == "" {
		return nil
	}
	return &DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: reason}
}

func (e *Entity) decode(d []byte) (reason string) {
	i := jsonscan.Space(d, 0)
	if i >= len(d) || d[i] != '{' {
		return "not a JSON object"
	}
	i = jsonscan.Space(d, i+1)
	if i < len(d) && d[i] == '}' {
		if jsonscan.Space(d, i+1) != len(d) {
			return "malformed JSON: data after the object"
		}
		return ""
	}
	firstBad := ""
	for {
		var name []byte
		var err error
		name, i, err = e.str(d, i)
		if err != nil {
			return "malformed JSON: " + err.Error()
		}
		i = jsonscan.Space(d, i)
		if i >= len(d) || d[i] != ':' {
			return "malformed JSON: expected ':'"
		}
		i = jsonscan.Space(d, i+1)
		if i >= len(d) {
			return "malformed JSON: truncated"
		}
		switch {
		case string(name) == "PartitionKey" || string(name) == "RowKey" || string(name) == "odata.etag":
			var v []byte
			v, i, err = e.str(d, i)
			if err != nil {
				return "malformed JSON: " + string(name) + ": " + err.Error()
			}
			switch string(name) {
			case "PartitionKey":
				e.PartitionKey = v
			case "RowKey":
				e.RowKey = v
			default:
				e.ETag = v
			}
		case bytes.IndexByte(name, '@') >= 0 || bytes.HasPrefix(name, []byte("odata.")):
			// An annotation. Only a property's type matters: any type but Double is an error.
			start := i
			if i, err = jsonscan.Value(d, i); err != nil {
				return "malformed JSON: " + err.Error()
			}
			prop, kind, _ := bytes.Cut(name, []byte("@"))
			typ := string(d[start:i])
			stringType := e.AllowStrings && (typ == `"Edm.String"` || typ == `"Edm.Binary"`)
			if string(kind) == "odata.type" && string(prop) != "Timestamp" && firstBad == "" &&
				typ != `"Edm.Double"` && !stringType {
				firstBad = fmt.Sprintf("property %q is %s, not Edm.Double", prop, d[start:i])
			}
		case string(name) == "Timestamp":
			if i, err = jsonscan.Value(d, i); err != nil {
				return "malformed JSON: " + err.Error()
			}
		case e.AllowNull && bytes.HasPrefix(d[i:], []byte("null")):
			// A property named in a $select that the entity lacks: the service answers null.
			if i, err = jsonscan.Value(d, i); err != nil {
				return "malformed JSON: " + err.Error()
			}
		case e.AllowStrings && d[i] == '"' && !isDoubleString(d[i:]):
			var v []byte
			if v, i, err = e.str(d, i); err != nil {
				return "malformed JSON: " + string(name) + ": " + err.Error()
			}
			e.Strings = append(e.Strings, StringProp{Name: name, Value: v})
		default:
			var v float64
			var ok bool
			start := i
			v, i, ok, err = e.double(d, i)
			if err != nil {
				return "malformed JSON: " + err.Error()
			}
			if !ok && firstBad == "" {
				firstBad = fmt.Sprintf("property %q has %.40s, not a Double", name, d[start:i])
			}
			e.Props = append(e.Props, Prop{Name: name, Value: v})
		}
		i = jsonscan.Space(d, i)
		if i >= len(d) {
			return "malformed JSON: truncated"
		}
		if d[i] == '}' {
			if jsonscan.Space(d, i+1) != len(d) {
				return "malformed JSON: data after the object"
			}
			return firstBad
		}
		if d[i] != ',' {
			return "malformed JSON: expected ',' or '}'"
		}
		i = jsonscan.Space(d, i+1)
	}
}

// isDoubleString reports whether d starts with a Double written as a JSON string.
func isDoubleString(d []byte) bool {
	for _, s := range []string{`"NaN"`, `"Infinity"`, `"-Infinity"`} {
		if bytes.HasPrefix(d, []byte(s)) {
			return true
		}
	}
	return false
}

// double reads a Double value: a JSON number, or "NaN", "Infinity", "-Infinity". ok is
// false (and err nil) for a well-formed value of another kind.
func (e *Entity) double(d []byte, i int) (v float64, next int, ok bool, err error) {
	c := d[i]
	if c == '"' {
		var s []byte
		s, next, err = e.str(d, i)
		if err != nil {
			return 0, next, false, err
		}
		switch string(s) {
		case "NaN":
			return math.NaN(), next, true, nil
		case "Infinity":
			return math.Inf(1), next, true, nil
		case "-Infinity":
			return math.Inf(-1), next, true, nil
		}
		return 0, next, false, nil
	}
	if c == '-' || (c >= '0' && c <= '9') {
		j, ok := jsonscan.Number(d, i)
		if !ok {
			return 0, j, false, fmt.Errorf("bad number %.40q", d[i:j])
		}
		v, err := strconv.ParseFloat(unsafe.String(&d[i], j-i), 64)
		if err != nil {
			return 0, j, false, fmt.Errorf("bad number %.40q", d[i:j])
		}
		return v, j, true, nil
	}
	next, err = jsonscan.Value(d, i)
	return 0, next, false, err
}

// str reads a JSON string at d[i]. Without escapes the result aliases d; otherwise it is
// unescaped into e.scratch.
func (e *Entity) str(d []byte, i int) ([]byte, int, error) {
	if i >= len(d) || d[i] != '"' {
		return nil, i, errors.New("expected a string")
	}
	start := i + 1
	j := start
	for j < len(d) && d[j] != '"' && d[j] != '\\' && d[j] >= 0x20 {
		j++
	}
	if j >= len(d) {
		return nil, j, errors.New("unterminated string")
	}
	if d[j] == '"' {
		return d[start:j:j], j + 1, nil
	}
	from := len(e.scratch)
	e.scratch = append(e.scratch, d[start:j]...)
	for j < len(d) {
		c := d[j]
		switch {
		case c == '"':
			out := e.scratch[from:len(e.scratch):len(e.scratch)]
			return out, j + 1, nil
		case c < 0x20:
			return nil, j, errors.New("control character in a string")
		case c != '\\':
			e.scratch = append(e.scratch, c)
			j++
			continue
		}
		if j+1 >= len(d) {
			break
		}
		switch d[j+1] {
		case '"', '\\', '/':
			e.scratch = append(e.scratch, d[j+1])
		case 'b':
			e.scratch = append(e.scratch, '\b')
		case 'f':
			e.scratch = append(e.scratch, '\f')
		case 'n':
			e.scratch = append(e.scratch, '\n')
		case 'r':
			e.scratch = append(e.scratch, '\r')
		case 't':
			e.scratch = append(e.scratch, '\t')
		case 'u':
			r, ok := jsonscan.Hex4(d, j+2)
			if !ok {
				return nil, j, errors.New("bad \\u escape")
			}
			j += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := jsonscan.Hex4(d, j+2); ok && j+1 < len(d) && d[j] == '\\' && d[j+1] == 'u' {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						j += 6
					}
				}
			}
			e.scratch = utf8.AppendRune(e.scratch, r)
			continue
		default:
			return nil, j, errors.New("bad escape")
		}
		j += 2
	}
	return nil, j, errors.New("unterminated string")
}
