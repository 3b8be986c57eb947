package entity

import (
	"encoding/base64"
	"math"
	"strconv"
	"unicode/utf8"
)

// Property names. Short names, because names count toward the 1 MiB entity and the bytes
// sent per point.
const (
	// ValueProperty holds the value of a one-point entity (the basic layout).
	ValueProperty = "V"
	// slotPrefix starts the name of a slot property: "v" + decimal slot offset.
	slotPrefix = 'v'
)

// AppendKeys starts an entity body: {"PartitionKey":...,"RowKey":...
// Close it with AppendEnd after the properties.
func AppendKeys(dst []byte, partitionKey, rowKey string) []byte {
	dst = append(dst, `{"PartitionKey":`...)
	dst = AppendString(dst, partitionKey)
	dst = append(dst, `,"RowKey":`...)
	return AppendString(dst, rowKey)
}

// AppendEnd closes an entity body.
func AppendEnd(dst []byte) []byte { return append(dst, '}') }

// AppendDouble appends ,"name":value typed as Edm.Double.
func AppendDouble(dst []byte, name string, v float64) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return appendValue(dst, name, -1, v)
}

// AppendStringProperty appends ,"name":"s" (an Edm.String: the service's default type for a
// JSON string).
func AppendStringProperty(dst []byte, name, s string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return AppendString(dst, s)
}

// AppendBinary appends ,"name@odata.type":"Edm.Binary","name":"<base64 of b>".
func AppendBinary(dst []byte, name string, b []byte) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, `@odata.type":"Edm.Binary","`...)
	dst = append(dst, name...)
	dst = append(dst, '"', ':', '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// SlotName returns the property name of a slot.
func SlotName(slot int) string {
	return string(AppendSlotName(nil, slot))
}

// AppendSlotName appends the property name of a slot.
func AppendSlotName(dst []byte, slot int) []byte {
	dst = append(dst, slotPrefix)
	return strconv.AppendInt(dst, int64(slot), 10)
}

// AppendSlot appends ,"v<slot>":value typed as Edm.Double.
func AppendSlot(dst []byte, slot int, v float64) []byte {
	dst = append(dst, ',', '"', slotPrefix)
	dst = strconv.AppendInt(dst, int64(slot), 10)
	dst = append(dst, '"', ':')
	return appendValue(dst, "", slot, v)
}

// ParseSlotName returns the slot of a property name written by AppendSlotName.
func ParseSlotName(name []byte) (int, bool) {
	if len(name) < 2 || len(name) > 4 || name[0] != slotPrefix || (name[1] == '0' && len(name) > 2) {
		return 0, false
	}
	n := 0
	for _, c := range name[1:] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// appendValue appends a Double's JSON value and, where the service could not infer the type
// from the number alone, its annotation. The property's name is name, or "v"+slot when
// slot >= 0.
func appendValue(dst []byte, name string, slot int, v float64) []byte {
	var special string
	switch {
	case math.IsNaN(v):
		special = `"NaN"`
	case math.IsInf(v, 1):
		special = `"Infinity"`
	case math.IsInf(v, -1):
		special = `"-Infinity"`
	}
	if special == "" {
		start := len(dst)
		dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
		if !integralText(dst[start:]) {
			return dst // a fraction or an exponent can only be a Double
		}
	} else {
		dst = append(dst, special...)
	}
	dst = append(dst, ',', '"')
	if slot >= 0 {
		dst = AppendSlotName(dst, slot)
	} else {
		dst = append(dst, name...)
	}
	return append(dst, `@odata.type":"Edm.Double"`...)
}

// integralText reports whether a formatted number has neither a fraction nor an exponent,
// so that the service would read it as an integer.
func integralText(b []byte) bool {
	for _, c := range b {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// AppendString appends s as a JSON string. Only what JSON requires is escaped (quotes,
// backslashes, control characters); invalid UTF-8 becomes U+FFFD.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
