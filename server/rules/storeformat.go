package rules

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/rulefmt"
	"gopkg.in/yaml.v3"

	"github.com/seed71701133/tablets/entity"
)

// The entities of the rule groups stored in a database's catalog table, specified byte for
// byte in docs/format.md ("Rule groups"). Every one is in partition GroupsPartition:
//
//	RowKey "generation"                       the generation: one more at every change
//	RowKey escaped namespace "|" escaped name a group: its YAML, in parts of 64 KiB
const (
	// GroupsPartition is the catalog partition of the stored rule groups.
	GroupsPartition = "rulegroups"
	// GenerationKey is the RowKey of the generation entity. No group's key is it: every
	// group's holds a "|".
	GenerationKey = "generation"
	// storeVersion is the format version of both kinds of entity.
	storeVersion = 1
	// partBytes is the size of every part of a group's YAML but the last: an Edm.Binary
	// property holds at most 64 KiB.
	partBytes = 64 << 10
	// maxParts is the most parts a group has: 15 of 64 KiB and the rest of the entity stay
	// under Azure's 1 MiB an entity.
	maxParts = 15
	// MaxStoredGroupBytes is the largest YAML of a stored group (960 KiB).
	MaxStoredGroupBytes = partBytes * maxParts

	versionProp = "V"
	lengthProp  = "L"
	genProp     = "G"
	partPrefix  = "Y"
	keySep      = '|'
	escapeChar  = '~'
)

// ErrStoredFormat wraps the errors of an entity of the rule-group partition that this version
// does not read: another format version, a malformed key or part, YAML that is not a valid
// group. The decoders reject such an entity; they never panic.
var ErrStoredFormat = errors.New("rules: a stored rule group's entity is not in a format this version reads")

// escapeName writes a namespace or group name as it is in a key: every byte of a character
// Azure forbids in keys (/ \ # ?, U+0000-U+001F, U+007F-U+009F), of the separator "|", of
// the escape "~", and of "'" and "%" (which travel badly in the URLs of single-entity
// requests) as "~" and its two hexadecimal digits, uppercase; every other character as it is.
// A name has one escaped form, and no escaped form holds "|".
func escapeName(s string) string {
	if !strings.ContainsFunc(s, mustEscape) {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for _, r := range s {
		if !mustEscape(r) {
			b.WriteRune(r)
			continue
		}
		var buf [utf8.UTFMax]byte
		for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
			b.WriteByte(escapeChar)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
	}
	return b.String()
}

// mustEscape reports the characters escapeName escapes.
func mustEscape(r rune) bool {
	switch r {
	case '/', '\\', '#', '?', keySep, escapeChar, '\'', '%':
		return true
	}
	return r <= 0x1f || (r >= 0x7f && r <= 0x9f)
}

// unescapeName is the inverse of escapeName; ok is false for a string escapeName never
// returns (a stray "~", lowercase or missing digits, a character that should have been
// escaped, escapes of a character that should not, invalid UTF-8).
func unescapeName(k string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c != escapeChar {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(k) {
			return "", false
		}
		hi, lo := unhex(k[i+1]), unhex(k[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	s := b.String()
	if s == "" || !utf8.ValidString(s) || escapeName(s) != k {
		return "", false
	}
	return s, true
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// checkName reports whether s can be a namespace or group name: not empty, valid UTF-8.
func checkName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("an empty %s", what)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s %q is not valid UTF-8", what, s)
	}
	return nil
}

// GroupKey is the RowKey of group name of namespace: both escaped, joined by "|". Names that
// make a key over Azure's 1 KiB (512 UTF-16 code units, about 500 plain characters
// together) are refused, as are empty ones and invalid UTF-8; the error wraps ErrBadRules.
func GroupKey(namespace, name string) (string, error) {
	if err := checkName("namespace", namespace); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadRules, err)
	}
	if err := checkName("rule group name", name); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadRules, err)
	}
	key := escapeName(namespace) + string(keySep) + escapeName(name)
	if entity.KeySize(key) > entity.MaxKeyBytes {
		return "", fmt.Errorf("%w: namespace %q and group %q are too long: their key would be %d bytes in UTF-16, over Azure's %d",
			ErrBadRules, truncate(namespace), truncate(name), entity.KeySize(key), entity.MaxKeyBytes)
	}
	return key, nil
}

// namespacePrefix is what the key of every group of namespace starts with; the keys of its
// groups are in [prefix, prefix with its last byte, "|", moved up by one).
func namespacePrefix(namespace string) string { return escapeName(namespace) + string(keySep) }

// namespaceEnd is the least key after every group key of namespace.
func namespaceEnd(namespace string) string { return escapeName(namespace) + string(keySep+1) }

// splitGroupKey is the inverse of GroupKey.
func splitGroupKey(key string) (namespace, name string, ok bool) {
	ns, n, found := strings.Cut(key, string(keySep))
	if !found {
		return "", "", false
	}
	if namespace, ok = unescapeName(ns); !ok {
		return "", "", false
	}
	if name, ok = unescapeName(n); !ok {
		return "", "", false
	}
	return namespace, name, true
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// MarshalGroup is the YAML of a rule group as the store keeps it and the ruler API answers
// it: yaml.v3's encoding of rulefmt.RuleGroup, indented by two spaces, fields in its order,
// maps (labels, annotations) sorted by key, empty optional fields left out.
func MarshalGroup(g rulefmt.RuleGroup) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&g); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// appendGroupEntity is the entity of the group whose key is key and YAML doc (at most
// MaxStoredGroupBytes, not empty): V, L, then the parts Y0, Y1, ...
func appendGroupEntity(dst []byte, key string, doc []byte) []byte {
	dst = entity.AppendKeys(dst, GroupsPartition, key)
	dst = entity.AppendDouble(dst, versionProp, storeVersion)
	dst = entity.AppendDouble(dst, lengthProp, float64(len(doc)))
	for i := 0; len(doc) > 0; i++ {
		n := min(len(doc), partBytes)
		dst = entity.AppendBinary(dst, fmt.Sprintf("%s%d", partPrefix, i), doc[:n])
		doc = doc[n:]
	}
	return entity.AppendEnd(dst)
}

// appendGenerationEntity is the generation entity at generation gen.
func appendGenerationEntity(dst []byte, gen uint64) []byte {
	dst = entity.AppendKeys(dst, GroupsPartition, GenerationKey)
	dst = entity.AppendDouble(dst, versionProp, storeVersion)
	dst = entity.AppendDouble(dst, genProp, float64(gen))
	return entity.AppendEnd(dst)
}

// StoredGroup is a rule group stored in the account, with its namespace.
type StoredGroup struct {
	Namespace string
	Group     rulefmt.RuleGroup
}

// decodeGroupEntity reads a group's entity, as the service returns it (other properties,
// such as Timestamp and odata.etag, are ignored): its namespace and group, parsed and
// checked as the API checks a group it stores. Anything else is an error wrapping
// ErrStoredFormat: another version, a key or a part that is malformed, parts missing or in
// excess, a length that is not theirs, YAML that is not a valid group, a group whose name is
// not its key's.
func decodeGroupEntity(raw []byte) (StoredGroup, error) {
	e := entity.Entity{AllowStrings: true}
	if err := e.Decode(raw); err != nil {
		return StoredGroup{}, fmt.Errorf("%w: %v", ErrStoredFormat, err)
	}
	fail := func(format string, args ...any) (StoredGroup, error) {
		return StoredGroup{}, fmt.Errorf("%w: RowKey %q: %s", ErrStoredFormat, truncate(string(e.RowKey)), fmt.Sprintf(format, args...))
	}
	if string(e.PartitionKey) != GroupsPartition {
		return fail("PartitionKey %q is not %q", truncate(string(e.PartitionKey)), GroupsPartition)
	}
	namespace, name, ok := splitGroupKey(string(e.RowKey))
	if !ok {
		return fail("not the key of a rule group")
	}
	version, length := math.NaN(), math.NaN()
	for _, p := range e.Props {
		switch string(p.Name) {
		case versionProp:
			version = p.Value
		case lengthProp:
			length = p.Value
		default:
			if strings.HasPrefix(string(p.Name), partPrefix) {
				return fail("part %s is not an Edm.Binary", p.Name)
			}
		}
	}
	if version != storeVersion {
		return fail("format version %v, not %d", version, storeVersion)
	}
	if length != math.Trunc(length) || length < 1 || length > MaxStoredGroupBytes {
		return fail("length %v is not a whole number from 1 to %d", length, MaxStoredGroupBytes)
	}
	n := (int(length) + partBytes - 1) / partBytes
	parts := make([][]byte, n)
	for _, s := range e.Strings {
		rest, ok := strings.CutPrefix(string(s.Name), partPrefix)
		if !ok {
			continue
		}
		i, ok := partIndex(rest)
		if !ok || i >= n {
			return fail("property %s is not a part of a group of %d parts", truncate(string(s.Name)), n)
		}
		if parts[i] != nil {
			return fail("part %d twice", i)
		}
		b, err := base64.StdEncoding.Strict().DecodeString(string(s.Value))
		if err != nil {
			return fail("part %d: %v", i, err)
		}
		if want := min(int(length)-i*partBytes, partBytes); len(b) != want {
			return fail("part %d holds %d bytes, not %d", i, len(b), want)
		}
		parts[i] = b
	}
	doc := make([]byte, 0, int(length))
	for i, p := range parts {
		if p == nil {
			return fail("part %d is missing", i)
		}
		doc = append(doc, p...)
	}
	g, err := ParseGroup(doc)
	if err != nil {
		return fail("%v", err)
	}
	if g.Name != name {
		return fail("the group is named %q, not as its key", truncate(g.Name))
	}
	return StoredGroup{Namespace: namespace, Group: g}, nil
}

// partIndex reads the decimal index of a part's name: digits, no leading zero.
func partIndex(s string) (int, bool) {
	if s == "" || len(s) > 2 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	i := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, true
}

// decodeGenerationEntity reads the generation entity: its generation, or an error wrapping
// ErrStoredFormat.
func decodeGenerationEntity(raw []byte) (uint64, error) {
	e := entity.Entity{AllowStrings: true}
	if err := e.Decode(raw); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrStoredFormat, err)
	}
	if string(e.PartitionKey) != GroupsPartition || string(e.RowKey) != GenerationKey {
		return 0, fmt.Errorf("%w: keys %q, %q are not the generation's", ErrStoredFormat, truncate(string(e.PartitionKey)), truncate(string(e.RowKey)))
	}
	version, gen := math.NaN(), math.NaN()
	for _, p := range e.Props {
		switch string(p.Name) {
		case versionProp:
			version = p.Value
		case genProp:
			gen = p.Value
		}
	}
	switch {
	case version != storeVersion:
		return 0, fmt.Errorf("%w: the generation's format version %v, not %d", ErrStoredFormat, version, storeVersion)
	case gen != math.Trunc(gen) || gen < 0 || gen > 1<<53:
		return 0, fmt.Errorf("%w: generation %v is not a whole number in range", ErrStoredFormat, gen)
	}
	return uint64(gen), nil
}
