package rules

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/seed71701133/tablets/entity"
)

// The lease of a rule group is an entity of the catalog of the tenant's database
// (docs/format.md, "Rule group leases"): PartitionKey LeasePartition, RowKey LeaseRowKey of
// the group's file and name.
const (
	// LeasePartition is the PartitionKey of every rule group lease.
	LeasePartition = "rulelease"
	// leaseVersion is the format's version, property V.
	leaseVersion = 1
	// leaseTextMax bounds F and N (for people: the RowKey decides), in bytes.
	leaseTextMax = 1024
	// maxLeaseLength bounds the L a reader accepts, and LeaseLength.
	maxLeaseLength = 366 * 24 * time.Hour
	// maxLeaseMillis bounds the T a reader accepts (the year 9999).
	maxLeaseMillis = 253402300799999
)

// ErrBadLease is the error of a lease entity that does not decode: malformed, or of a
// version this code does not know (a newer server's: this one leaves the group to it).
var ErrBadLease = errors.New("rules: a rule group lease that does not decode")

// leaseRecord is a lease entity's content.
type leaseRecord struct {
	// Holder is the id of the server holding the lease; empty: released (nobody holds it).
	Holder string
	// Length is how long the lease lasts after Written unless renewed, in milliseconds.
	Length time.Duration
	// Last is the last evaluation timestamp recorded, Unix milliseconds (0: none yet).
	Last int64
	// File and Name are the group's (for people; the RowKey is the group's identity).
	File, Name string
	// State is the group's rules' state at the last evaluation recorded, as its holder saw
	// it (S, see lease_state.go; "": none).
	State string
	// Written is the entity's Timestamp: the service's time of its last write (decoded
	// only: the service sets it).
	Written time.Time
}

// LeaseRowKey is the RowKey of the lease of the group name of file: the first 16 bytes of
// the SHA-256 of uvarint(len(file)), file, name, in lowercase hex.
func LeaseRowKey(file, name string) string {
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(file))))
	h.Write([]byte(file))
	h.Write([]byte(name))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// appendLease is the body of the lease entity r of the group whose RowKey is rk.
func appendLease(rk string, r leaseRecord) []byte {
	b := entity.AppendKeys(nil, LeasePartition, rk)
	b = entity.AppendDouble(b, "V", leaseVersion)
	b = entity.AppendStringProperty(b, "H", r.Holder)
	b = entity.AppendDouble(b, "L", float64(r.Length.Milliseconds()))
	b = entity.AppendDouble(b, "T", float64(r.Last))
	b = entity.AppendStringProperty(b, "F", truncateText(r.File))
	b = entity.AppendStringProperty(b, "N", truncateText(r.Name))
	if r.State != "" {
		b = entity.AppendStringProperty(b, "S", r.State)
	}
	return entity.AppendEnd(b)
}

// truncateText cuts s to leaseTextMax bytes at a character boundary (and drops what is not
// UTF-8).
func truncateText(s string) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // invalid bytes become U+FFFD
	}
	if len(s) <= leaseTextMax {
		return s
	}
	cut := leaseTextMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// decodeLease reads a lease entity as the service returns it. Unknown properties and
// annotations are ignored; V must be 1, L a whole number of milliseconds in (0, 24h], T a
// whole number of milliseconds in [0, year 9999], H, F and N strings, S (when present) a
// string (its JSON is read when shown: decodeState), Timestamp (when present) an RFC 3339
// time.
func decodeLease(body []byte) (leaseRecord, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return leaseRecord{}, fmt.Errorf("%w: %v", ErrBadLease, err)
	}
	num := func(name string) (float64, error) {
		raw, ok := m[name]
		if !ok {
			return 0, fmt.Errorf("no %s", name)
		}
		var n json.Number
		if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
			return 0, fmt.Errorf("%s is not a number", name)
		}
		v, err := n.Float64()
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) {
			return 0, fmt.Errorf("%s %s is not a whole number", name, raw)
		}
		return v, nil
	}
	str := func(name string) (string, error) {
		raw, ok := m[name]
		if !ok {
			return "", fmt.Errorf("no %s", name)
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%s is not a string", name)
		}
		return s, nil
	}
	var r leaseRecord
	bad := func(err error) (leaseRecord, error) { return leaseRecord{}, fmt.Errorf("%w: %v", ErrBadLease, err) }
	v, err := num("V")
	if err != nil {
		return bad(err)
	}
	if v != leaseVersion {
		return bad(fmt.Errorf("version %v", v))
	}
	length, err := num("L")
	if err != nil {
		return bad(err)
	}
	if length <= 0 || length > float64(maxLeaseLength.Milliseconds()) {
		return bad(fmt.Errorf("length %v ms", length))
	}
	r.Length = time.Duration(length) * time.Millisecond
	last, err := num("T")
	if err != nil {
		return bad(err)
	}
	if last < 0 || last > maxLeaseMillis {
		return bad(fmt.Errorf("last evaluation %v ms", last))
	}
	r.Last = int64(last)
	for _, p := range []struct {
		name string
		to   *string
	}{{"H", &r.Holder}, {"F", &r.File}, {"N", &r.Name}} {
		if *p.to, err = str(p.name); err != nil {
			return bad(err)
		}
	}
	if _, ok := m["S"]; ok {
		if r.State, err = str("S"); err != nil {
			return bad(err)
		}
	}
	if raw, ok := m["Timestamp"]; ok {
		var ts string
		if err := json.Unmarshal(raw, &ts); err != nil {
			return bad(errors.New("Timestamp is not a string"))
		}
		if r.Written, err = time.Parse(time.RFC3339Nano, ts); err != nil {
			return bad(fmt.Errorf("Timestamp %q: %v", ts, err))
		}
	}
	return r, nil
}
