package azurite

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/seed71701133/tablets/internal/meter"
)

// Azure Table Storage limits that Azurite does not (fully) enforce. The Checker reports a
// request that exceeds one of them. They are variables so a test can tighten one to probe
// an edge, but no test should loosen them.
var (
	// MaxFilterComparisons is the number of discrete comparisons a $filter may hold:
	// "no more than 15 discrete comparisons" (Azure docs, Querying tables and entities).
	// Azurite accepts hundreds.
	MaxFilterComparisons = 15
	// MaxURLLength bounds the length of a request URL (scheme, host, path and query).
	// Azure documents no figure but rejects long filters with HTTP 414; 8 KiB is a
	// conservative bound (Azurite answers 431 somewhere above 8.4K characters).
	MaxURLLength = 8192
	// MaxTop is the largest $top: a query page holds at most 1,000 entities.
	MaxTop = 1000
	// MaxProperties is the number of properties an entity may have besides PartitionKey,
	// RowKey and Timestamp (255 in all). Azurite accepts more.
	MaxProperties = 252
	// MaxEntityBody bounds the JSON body of a single entity write. Azure's limit is 1 MiB of
	// property data; the JSON body is always at least that large, so this is the tightest
	// bound a client can check.
	MaxEntityBody = 1 << 20
	// MaxKeyBytes bounds PartitionKey and RowKey: Azure allows 1 KiB each. The service keeps
	// strings as UTF-16, so the Checker counts two bytes per UTF-16 code unit (512 code units
	// at most), the strict reading, independently of the library's own count.
	MaxKeyBytes = 1024
	// MaxPropertyNameLength bounds a property name (characters).
	MaxPropertyNameLength = 255
	// MaxBatchOperations is the number of operations in one entity group transaction.
	MaxBatchOperations = 100
	// MaxBatchBody bounds the payload of one entity group transaction: 4 MiB.
	MaxBatchBody = 4 << 20
)

// comparisonOps are the OData comparison operators that count toward MaxFilterComparisons.
var comparisonOps = map[string]bool{"eq": true, "ne": true, "gt": true, "ge": true, "lt": true, "le": true}

// Stats counts the requests a Checker has seen. Every attempt counts, retries included.
type Stats struct {
	Requests        int64 // every request
	Queries         int64 // GET of a table's entities: queries and point reads
	Batches         int64 // POST .../$batch
	EntityWrites    int64 // single entity inserts, updates, merges and upserts
	Deletes         int64 // single entity deletes
	Other           int64 // anything else: table create/delete/list, service calls
	BatchOperations int64 // operations inside batches
	EntityBytes     int64 // bytes of entity JSON bodies: single writes plus batch sub-requests
	RequestBytes    int64 // bytes of request bodies sent
	ResponseBytes   int64 // bytes of response bodies read
	// Calls counts requests as the caller made them: attempts that share an
	// x-ms-client-request-id (azcore's retries of one request) count once.
	Calls int64
	// Busy is the time during which at least one request waited for its reply's headers:
	// of a read's time, what the account (Azurite) took, the rest being the caller's.
	Busy time.Duration
}

// Checker is a policy.Transporter that checks every request against Azure's limits (see
// [MaxFilterComparisons] and the variables next to it), records violations, counts requests
// and forwards them to the next transport. It is safe for concurrent use.
//
// Install it as aztables.ClientOptions.Transport: it then sits below the retry policy and
// sees every attempt. [NewTable] does this for you.
type Checker struct {
	next      policy.Transporter
	report    func(string)
	countOnly bool // NewCounter: count, check nothing

	mu         sync.Mutex
	violations []string
	callIDs    map[string]bool // request IDs seen, for Stats.Calls
	calls      int64

	wire meter.Meter // requests and body bytes, below the checks
	busy busyTime    // Stats.Busy

	queries, batches, entityWrites, deletes, other atomic.Int64
	batchOps, entityBytes                          atomic.Int64
}

// NewChecker returns a Checker that forwards to next (nil: a shared default HTTP client
// with sane timeouts). Each violation is recorded and, if report is non-nil, passed to it.
func NewChecker(next policy.Transporter, report func(violation string)) *Checker {
	if next == nil {
		next = DefaultTransport()
	}
	return &Checker{next: next, report: report}
}

// NewCounter returns a Checker that only counts (requests, batch operations, entity bytes)
// and checks nothing: for benchmarks, where the checks' own JSON decoding would compete with
// the library and Azurite for the CPU. The conformance and integration tests check.
func NewCounter(next policy.Transporter) *Checker {
	c := NewChecker(next, nil)
	c.countOnly = true
	return c
}

// Violations returns the violations recorded so far, oldest first.
func (c *Checker) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...)
}

// Stats returns the request counts since creation or the last [Checker.Reset].
func (c *Checker) Stats() Stats {
	wire := c.wire.Counts()
	return Stats{
		Requests:        wire.Requests,
		Queries:         c.queries.Load(),
		Batches:         c.batches.Load(),
		EntityWrites:    c.entityWrites.Load(),
		Deletes:         c.deletes.Load(),
		Other:           c.other.Load(),
		BatchOperations: c.batchOps.Load(),
		EntityBytes:     c.entityBytes.Load(),
		RequestBytes:    wire.BytesSent,
		ResponseBytes:   wire.BytesReceived,
		Calls:           c.callCount(),
		Busy:            c.busy.total(),
	}
}

// Reset zeroes the counters and clears the recorded violations (violations already
// reported to the test stay reported).
func (c *Checker) Reset() {
	c.wire.Reset()
	c.busy.reset()
	for _, n := range []*atomic.Int64{&c.queries, &c.batches, &c.entityWrites,
		&c.deletes, &c.other, &c.batchOps, &c.entityBytes} {
		n.Store(0)
	}
	c.mu.Lock()
	c.violations = nil
	c.callIDs, c.calls = nil, 0
	c.mu.Unlock()
}

func (c *Checker) violate(req *http.Request, format string, args ...any) {
	v := summary(req) + ": " + fmt.Sprintf(format, args...)
	c.mu.Lock()
	c.violations = append(c.violations, v)
	c.mu.Unlock()
	if c.report != nil {
		c.report(v)
	}
}

// summary describes a request in one line for a violation message.
func summary(req *http.Request) string {
	u := req.URL.String()
	if len(u) > 200 {
		u = fmt.Sprintf("%s...(%d chars)", u[:200], len(u))
	}
	return req.Method + " " + u
}

// Do checks req, counts it and forwards it to the next transport.
func (c *Checker) Do(req *http.Request) (*http.Response, error) {
	c.countCall(req.Header.Get("x-ms-client-request-id"))
	return c.do(req)
}

func (c *Checker) callCount() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// countCall counts a request unless an earlier attempt carried the same request ID.
func (c *Checker) countCall(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id != "" {
		if c.callIDs == nil {
			c.callIDs = map[string]bool{}
		}
		if c.callIDs[id] {
			return
		}
		c.callIDs[id] = true
	}
	c.calls++
}

func (c *Checker) do(req *http.Request) (*http.Response, error) {
	t := classify(req.Method, req.URL)
	if c.countOnly {
		return c.count(req, t)
	}
	c.checkQueryString(req)

	var body []byte
	if t.kind == kindBatch || t.kind == kindEntityWrite {
		var err error
		body, err = meter.ReadBody(req)
		if err != nil {
			return nil, fmt.Errorf("azurite.Checker: read request body: %w", err)
		}
	}
	switch t.kind {
	case kindQuery:
		c.queries.Add(1)
	case kindEntityWrite:
		c.entityWrites.Add(1)
		c.entityBytes.Add(int64(len(body)))
		c.checkEntityWrite(req, t, body)
	case kindDelete:
		c.deletes.Add(1)
		c.checkURLKeys(req, t)
	case kindBatch:
		c.batches.Add(1)
		c.checkBatch(req, body)
	default:
		c.other.Add(1)
	}
	return c.send(req)
}

// count is Do for a counter: the same Stats, no checks.
func (c *Checker) count(req *http.Request, t target) (*http.Response, error) {
	switch t.kind {
	case kindQuery:
		c.queries.Add(1)
	case kindDelete:
		c.deletes.Add(1)
	case kindEntityWrite, kindBatch:
		body, err := meter.ReadBody(req)
		if err != nil {
			return nil, fmt.Errorf("azurite.Checker: read request body: %w", err)
		}
		if t.kind == kindEntityWrite {
			c.entityWrites.Add(1)
			c.entityBytes.Add(int64(len(body)))
			break
		}
		c.batches.Add(1)
		var subs []subRequest
		if err := parseMultipart(req.Header.Get("Content-Type"), body, &subs, 0); err == nil {
			c.batchOps.Add(int64(len(subs)))
			for _, s := range subs {
				if _, err := s.request(); err == nil {
					c.entityBytes.Add(int64(len(s.body)))
				}
			}
		}
	default:
		c.other.Add(1)
	}
	return c.send(req)
}

func (c *Checker) checkQueryString(req *http.Request) {
	if n := len(req.URL.String()); n > MaxURLLength {
		c.violate(req, "URL is %d characters, limit %d", n, MaxURLLength)
	}
	q := req.URL.Query()
	if f, ok := q["$filter"]; ok {
		for _, f := range f {
			if n := CountComparisons(f); n > MaxFilterComparisons {
				c.violate(req, "$filter has %d comparisons, Azure allows %d", n, MaxFilterComparisons)
			}
		}
	}
	if top, ok := q["$top"]; ok {
		for _, s := range top {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			switch {
			case err != nil:
				c.violate(req, "$top %q is not an integer", s)
			case n < 1 || n > MaxTop:
				c.violate(req, "$top is %d, must be 1..%d", n, MaxTop)
			}
		}
	}
}

// CountComparisons returns the number of comparison operators (eq, ne, gt, ge, lt, le as
// whole lowercase words) in an OData $filter, ignoring text inside single-quoted literals
// (” inside a literal is an escaped quote).
func CountComparisons(filter string) int {
	n := 0
	inLiteral := false
	for i := 0; i < len(filter); {
		ch := filter[i]
		if inLiteral {
			if ch == '\'' {
				if i+1 < len(filter) && filter[i+1] == '\'' {
					i += 2
					continue
				}
				inLiteral = false
			}
			i++
			continue
		}
		if ch == '\'' {
			inLiteral = true
			i++
			continue
		}
		if isWordByte(ch) {
			j := i
			for j < len(filter) && isWordByte(filter[j]) {
				j++
			}
			if comparisonOps[filter[i:j]] {
				n++
			}
			i = j
			continue
		}
		i++
	}
	return n
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}

type requestKind int

const (
	kindOther requestKind = iota
	kindQuery
	kindEntityWrite
	kindDelete
	kindBatch
)

// target is what a request addresses.
type target struct {
	kind    requestKind
	table   string
	hasKeys bool   // the URL addresses one entity: table(PartitionKey='..',RowKey='..')
	keys    string // the escaped "(PartitionKey=...)" part of the path
}

// classify sorts a request by method and path. The last path segment is "$batch",
// "Tables", "Tables('t')", "t", "t()" or "t(PartitionKey='..',RowKey='..')"; keys are
// percent-encoded, so the first '(' ends the table name.
func classify(method string, u *url.URL) target {
	p := u.EscapedPath()
	end := strings.IndexByte(p, '(')
	if end < 0 {
		end = len(p)
	}
	start := strings.LastIndexByte(p[:end], '/') + 1
	t := target{table: p[start:end], keys: p[end:]}
	t.hasKeys = strings.HasPrefix(t.keys, "(PartitionKey=")
	entitySet := t.keys == "" || t.keys == "()"
	switch {
	case t.table == "$batch":
		if method == http.MethodPost {
			t.kind = kindBatch
		}
	case t.table == "" || strings.EqualFold(t.table, "Tables"):
	case method == http.MethodGet && (entitySet || t.hasKeys):
		t.kind = kindQuery
	case method == http.MethodPost && entitySet:
		t.kind = kindEntityWrite
	case (method == http.MethodPut || method == http.MethodPatch || method == "MERGE") && t.hasKeys:
		t.kind = kindEntityWrite
	case method == http.MethodDelete && t.hasKeys:
		t.kind = kindDelete
	}
	return t
}

var urlKeysRE = regexp.MustCompile(`(?s)^\(PartitionKey='(.*)',RowKey='(.*)'\)$`)

// urlKeys decodes the keys of an entity URL. In the path they are percent-encoded and a
// single quote is doubled.
func urlKeys(escaped string) (pk, rk string, err error) {
	s, err := url.PathUnescape(escaped)
	if err != nil {
		return "", "", err
	}
	m := urlKeysRE.FindStringSubmatch(s)
	if m == nil {
		return "", "", fmt.Errorf("cannot parse %q", s)
	}
	return strings.ReplaceAll(m[1], "''", "'"), strings.ReplaceAll(m[2], "''", "'"), nil
}

// entityKey identifies an entity in a batch.
type entityKey struct{ pk, rk string }

// checkURLKeys validates the keys in an entity URL and returns them (ok false if absent
// or unparsable).
func (c *Checker) checkURLKeys(req *http.Request, t target) (k entityKey, ok bool) {
	if !t.hasKeys {
		return k, false
	}
	pk, rk, err := urlKeys(t.keys)
	if err != nil {
		c.violate(req, "entity URL keys: %v", err)
		return k, false
	}
	for _, p := range KeyProblems("PartitionKey", pk) {
		c.violate(req, "URL %s", p)
	}
	for _, p := range KeyProblems("RowKey", rk) {
		c.violate(req, "URL %s", p)
	}
	return entityKey{pk, rk}, true
}

// checkEntityWrite validates an insert/update/merge/upsert: URL keys (if any) and the JSON
// body. It returns the entity's keys (from the URL if present, else the body).
func (c *Checker) checkEntityWrite(req *http.Request, t target, body []byte) (k entityKey, ok bool) {
	k, ok = c.checkURLKeys(req, t)
	if n := len(body); n > MaxEntityBody {
		c.violate(req, "entity body is %d bytes, limit %d", n, MaxEntityBody)
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(body, &props); err != nil {
		c.violate(req, "entity body is not a JSON object: %v", err)
		return k, ok
	}
	n := 0
	var bad []string
	for name := range props {
		switch {
		case name == "PartitionKey" || name == "RowKey" || name == "Timestamp":
		case strings.HasPrefix(name, "odata."), strings.Contains(name, "@"): // metadata, annotations
		default:
			n++
			if !validPropertyName(name) {
				bad = append(bad, name)
			}
		}
	}
	if n > MaxProperties {
		c.violate(req, "entity has %d properties, Azure allows %d besides PartitionKey, RowKey and Timestamp", n, MaxProperties)
	}
	if len(bad) > 0 {
		if len(bad) > 5 {
			bad = append(bad[:5], "...")
		}
		c.violate(req, "invalid property names (letters, digits, _; not starting with a digit; at most %d): %q", MaxPropertyNameLength, bad)
	}
	var bodyKeys entityKey
	for _, name := range []string{"PartitionKey", "RowKey"} {
		raw, present := props[name]
		if !present {
			if !t.hasKeys { // an insert: the keys are only in the body
				c.violate(req, "entity body has no %s", name)
			}
			continue
		}
		var key string
		if err := json.Unmarshal(raw, &key); err != nil {
			c.violate(req, "%s in body is not a string: %s", name, raw)
			continue
		}
		for _, p := range KeyProblems(name, key) {
			c.violate(req, "body %s", p)
		}
		if name == "PartitionKey" {
			bodyKeys.pk = key
		} else {
			bodyKeys.rk = key
		}
	}
	if !ok {
		_, hasPK := props["PartitionKey"]
		_, hasRK := props["RowKey"]
		k, ok = bodyKeys, hasPK && hasRK
	}
	return k, ok
}

func validPropertyName(name string) bool {
	if name == "" || utf8.RuneCountInString(name) > MaxPropertyNameLength {
		return false
	}
	for i, r := range name {
		if !(r == '_' || unicode.IsLetter(r) || i > 0 && unicode.IsDigit(r)) {
			return false
		}
	}
	return true
}

// KeyProblems returns what is wrong with a PartitionKey or RowKey value for Azure (nil if
// nothing): longer than MaxKeyBytes bytes of UTF-16, or containing / \ # ? or a control
// character (U+0000-U+001F, U+007F-U+009F). name is used in the messages.
func KeyProblems(name, key string) []string {
	var probs []string
	show := key
	if len(show) > 64 {
		show = show[:64] + "..."
	}
	if size := 2 * len(utf16.Encode([]rune(key))); size > MaxKeyBytes {
		probs = append(probs, fmt.Sprintf("%s is %d bytes as UTF-16, limit %d", name, size, MaxKeyBytes))
	}
	if !utf8.ValidString(key) {
		probs = append(probs, fmt.Sprintf("%s %q is not valid UTF-8", name, show))
	}
	var forbidden []string
	for _, r := range key {
		switch {
		case r == '/' || r == '\\' || r == '#' || r == '?':
			forbidden = append(forbidden, string(r))
		case r <= 0x1F || r >= 0x7F && r <= 0x9F:
			forbidden = append(forbidden, fmt.Sprintf("U+%04X", r))
		}
	}
	if len(forbidden) > 0 {
		probs = append(probs, fmt.Sprintf("%s %q contains characters Azure forbids in keys: %s", name, show, strings.Join(forbidden, " ")))
	}
	return probs
}

// checkBatch parses an entity group transaction the way aztables builds it: a
// multipart/mixed body whose part is a multipart/mixed changeset of application/http
// sub-requests ("METHOD URL HTTP/1.1", headers, blank line, JSON body).
func (c *Checker) checkBatch(req *http.Request, body []byte) {
	if n := len(body); n > MaxBatchBody {
		c.violate(req, "batch body is %d bytes, limit %d", n, MaxBatchBody)
	}
	var subs []subRequest
	if err := parseMultipart(req.Header.Get("Content-Type"), body, &subs, 0); err != nil {
		c.violate(req, "cannot parse batch body: %v", err)
		return
	}
	c.batchOps.Add(int64(len(subs)))
	if n := len(subs); n > MaxBatchOperations {
		c.violate(req, "batch has %d operations, limit %d", n, MaxBatchOperations)
	}
	if len(subs) == 0 {
		c.violate(req, "batch has no operations")
	}
	seen := map[entityKey]int{}
	firstOp, otherOp := -1, -1 // first operation, first one in another partition
	var firstPK string
	partitions := map[string]bool{}
	tables := map[string]bool{}
	for i, s := range subs {
		sub, err := s.request()
		if err != nil {
			c.violate(req, "operation %d: %v", i, err)
			continue
		}
		t := classify(sub.Method, sub.URL)
		tables[t.table] = true
		inner := &Checker{} // collects the sub-request's violations, re-reported below
		var k entityKey
		var ok bool
		switch t.kind {
		case kindEntityWrite:
			c.entityBytes.Add(int64(len(s.body)))
			k, ok = inner.checkEntityWrite(sub, t, s.body)
		case kindDelete:
			k, ok = inner.checkURLKeys(sub, t)
		default:
			c.violate(req, "operation %d: %s %s is not an entity insert, update, merge or delete", i, sub.Method, sub.URL)
			continue
		}
		for _, v := range inner.violations {
			c.violate(req, "operation %d: %s", i, v)
		}
		if !ok {
			continue
		}
		partitions[k.pk] = true
		if firstOp < 0 {
			firstOp, firstPK = i, k.pk
		} else if otherOp < 0 && k.pk != firstPK {
			otherOp = i
			c.violate(req, "operation %d has PartitionKey %q, operation %d has %q: a batch must target ONE partition", otherOp, k.pk, firstOp, firstPK)
		}
		if j, dup := seen[k]; dup {
			c.violate(req, "operations %d and %d both target entity (%q, %q): each entity at most once per batch", j, i, k.pk, k.rk)
		} else {
			seen[k] = i
		}
	}
	if len(partitions) > 2 {
		c.violate(req, "batch spans %d partitions", len(partitions))
	}
	if len(tables) > 1 {
		c.violate(req, "batch spans %d tables: all operations must target one table", len(tables))
	}
}

// subRequest is one application/http part of a batch.
type subRequest struct {
	raw  []byte
	body []byte
}

// request parses the request line and headers; the body is everything after the blank
// line (kept in s.body), whatever Content-Length says.
func (s *subRequest) request() (*http.Request, error) {
	br := bufio.NewReader(bytes.NewReader(s.raw))
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return nil, fmt.Errorf("read request line: %w", err)
	}
	parts := strings.SplitN(line, " ", 3)
	if len(parts) != 3 || !strings.HasPrefix(parts[2], "HTTP/") {
		return nil, fmt.Errorf("malformed request line %q", line)
	}
	u, err := url.Parse(parts[1])
	if err != nil {
		return nil, fmt.Errorf("request URL: %w", err)
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("read headers: %w", err)
	}
	s.body, err = io.ReadAll(br)
	if err != nil {
		return nil, err
	}
	s.body = bytes.TrimRight(s.body, "\r\n")
	return &http.Request{Method: parts[0], URL: u, Header: http.Header(hdr)}, nil
}

// parseMultipart appends the application/http parts of a multipart/mixed body to subs,
// descending into nested multipart/mixed parts (changesets).
func parseMultipart(contentType string, body []byte, subs *[]subRequest, depth int) error {
	if depth > 2 {
		return fmt.Errorf("multipart nested too deeply")
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("Content-Type %q: %w", contentType, err)
	}
	if mt != "multipart/mixed" || params["boundary"] == "" {
		return fmt.Errorf("Content-Type %q: want multipart/mixed with a boundary", contentType)
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return err
		}
		ct := p.Header.Get("Content-Type")
		switch {
		case strings.HasPrefix(ct, "multipart/mixed"):
			if err := parseMultipart(ct, data, subs, depth+1); err != nil {
				return err
			}
		case strings.HasPrefix(ct, "application/http"):
			*subs = append(*subs, subRequest{raw: data})
		default:
			return fmt.Errorf("unexpected part Content-Type %q", ct)
		}
	}
}

// send forwards req to the next transport, counting its bytes and the time it waits.
func (c *Checker) send(req *http.Request) (*http.Response, error) {
	c.busy.begin()
	defer c.busy.end()
	return c.wire.Send(c.next, req)
}

// busyTime sums the time during which at least one request is under way.
type busyTime struct {
	mu    sync.Mutex
	n     int       // requests under way
	since time.Time // when n last went from 0 to 1
	sum   time.Duration
}

func (b *busyTime) begin() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		b.since = time.Now()
	}
	b.n++
}

func (b *busyTime) end() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n--; b.n == 0 {
		b.sum += time.Since(b.since)
	}
}

func (b *busyTime) total() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n > 0 {
		return b.sum + time.Since(b.since)
	}
	return b.sum
}

func (b *busyTime) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sum, b.since = 0, time.Now()
}
