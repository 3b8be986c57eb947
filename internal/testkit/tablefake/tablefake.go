// Package tablefake is an in-memory stand-in for the Azure Table service at the HTTP
// transport, for tests that drive real client code through millions of requests, where
// Azurite would take hours. It keeps the set of tables (create, delete, list, and
// TableNotFound for a table that does not exist) but no entity: every write succeeds, a point
// read finds nothing (404) and a query answers an empty page. Install it as
// aztables.ClientOptions.Transport.
// Part of the test kit (internal/testkit): only tests and other kit packages import it.
package tablefake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Stats counts the requests the fake answered, by kind.
type Stats struct {
	Requests     int64
	TableCreates int64
	TableDeletes int64
	TableLists   int64
	EntityGets   int64 // point reads: GET table(PartitionKey='..',RowKey='..')
	Queries      int64 // GET table() with or without a filter
	EntityWrites int64 // single inserts, upserts, merges
	Batches      int64 // POST $batch
	NotFound     int64 // queries answered TableNotFound
}

// Transport is a policy.Transporter answering as the Table service would for an account
// that holds tables but keeps no entity. It is safe for concurrent use.
type Transport struct {
	mu     sync.Mutex
	tables map[string]bool // lower-case names: table names are case-insensitive

	requests, creates, deletes, lists, gets, queries, writes, batches, notFound atomic.Int64
}

// New returns a fake account with no table.
func New() *Transport { return &Transport{tables: map[string]bool{}} }

// Stats returns the counts so far.
func (t *Transport) Stats() Stats {
	return Stats{Requests: t.requests.Load(), TableCreates: t.creates.Load(), TableDeletes: t.deletes.Load(),
		TableLists: t.lists.Load(), EntityGets: t.gets.Load(), Queries: t.queries.Load(),
		EntityWrites: t.writes.Load(), Batches: t.batches.Load(), NotFound: t.notFound.Load()}
}

// Tables returns the names of the tables that exist, sorted.
func (t *Transport) Tables() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.tables))
	for n := range t.tables {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// CreateTable makes a table exist, as another process would.
func (t *Transport) CreateTable(name string) {
	t.mu.Lock()
	t.tables[strings.ToLower(name)] = true
	t.mu.Unlock()
}

// DeleteTable makes a table not exist, as another process would.
func (t *Transport) DeleteTable(name string) {
	t.mu.Lock()
	delete(t.tables, strings.ToLower(name))
	t.mu.Unlock()
}

func (t *Transport) exists(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tables[strings.ToLower(name)]
}

// entityPath matches "table(PartitionKey='..',RowKey='..')" and "table()".
var entityPath = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9]*)\((.*)\)$`)

// tableName is a table's path: where an insert is POSTed.
var tableName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

// Do answers req.
func (t *Transport) Do(req *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	if req.Body != nil {
		_ = req.Body.Close() // unread: the fake answers from the URL
	}
	path := req.URL.Path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		path = path[i+1:]
	}
	path, _ = url.PathUnescape(path)
	switch {
	case path == "Tables" && req.Method == http.MethodPost:
		t.creates.Add(1)
		return t.createTable(req)
	case path == "Tables" && req.Method == http.MethodGet:
		t.lists.Add(1)
		return t.listTables(req)
	case strings.HasPrefix(path, "Tables('") && req.Method == http.MethodDelete:
		t.deletes.Add(1)
		name := strings.TrimSuffix(strings.TrimPrefix(path, "Tables('"), "')")
		if !t.exists(name) {
			return reply(req, http.StatusNotFound, "TableNotFound", nil), nil
		}
		t.DeleteTable(name)
		return reply(req, http.StatusNoContent, "", nil), nil
	case path == "$batch" && req.Method == http.MethodPost:
		t.batches.Add(1)
		return batchReply(req), nil
	}
	if tableName.MatchString(path) && req.Method == http.MethodPost { // an insert (AddEntity)
		t.writes.Add(1)
		if !t.exists(path) {
			t.notFound.Add(1)
			return reply(req, http.StatusNotFound, "TableNotFound", nil), nil
		}
		resp := reply(req, http.StatusNoContent, "", nil)
		resp.Header.Set("ETag", `W/"datetime'2024-01-01T00%3A00%3A00.0000000Z'"`)
		return resp, nil
	}
	m := entityPath.FindStringSubmatch(path)
	if m == nil {
		return reply(req, http.StatusBadRequest, "InvalidUri", nil), nil
	}
	table, keys := m[1], m[2]
	if req.Method == http.MethodGet && keys == "" {
		t.queries.Add(1)
	} else if req.Method == http.MethodGet {
		t.gets.Add(1)
	} else {
		t.writes.Add(1)
	}
	if !t.exists(table) {
		t.notFound.Add(1)
		return reply(req, http.StatusNotFound, "TableNotFound", nil), nil
	}
	switch {
	case req.Method == http.MethodGet && keys == "":
		return reply(req, http.StatusOK, "", map[string]any{"value": []any{}}), nil
	case req.Method == http.MethodGet:
		return reply(req, http.StatusNotFound, "ResourceNotFound", nil), nil
	case req.Method == http.MethodDelete:
		return reply(req, http.StatusNotFound, "ResourceNotFound", nil), nil
	default: // PUT, PATCH, MERGE: the write is taken
		resp := reply(req, http.StatusNoContent, "", nil)
		resp.Header.Set("ETag", `W/"datetime'2024-01-01T00%3A00%3A00.0000000Z'"`)
		return resp, nil
	}
}

func (t *Transport) createTable(req *http.Request) (*http.Response, error) {
	var body struct{ TableName string }
	if req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			_ = json.NewDecoder(rc).Decode(&body)
		}
	}
	if body.TableName == "" {
		return reply(req, http.StatusBadRequest, "InvalidInput", nil), nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tables[strings.ToLower(body.TableName)] {
		return reply(req, http.StatusConflict, "TableAlreadyExists", nil), nil
	}
	t.tables[strings.ToLower(body.TableName)] = true
	return reply(req, http.StatusCreated, "", map[string]any{"TableName": body.TableName}), nil
}

// tableRange matches the listing filters of this project: TableName ge 'a' and TableName lt 'b'.
var tableRange = regexp.MustCompile(`^\(?TableName ge '([^']*)'\)? and \(?TableName lt '([^']*)'\)?$`)

func (t *Transport) listTables(req *http.Request) (*http.Response, error) {
	f := req.URL.Query().Get("$filter")
	lo, hi := "", "\U0010FFFF"
	if f != "" {
		m := tableRange.FindStringSubmatch(f)
		if m == nil {
			return reply(req, http.StatusNotImplemented, "NotImplemented", nil), fmt.Errorf("tablefake: filter %q", f)
		}
		lo, hi = m[1], m[2]
	}
	var names []map[string]string
	for _, n := range t.Tables() {
		if n >= strings.ToLower(lo) && n < strings.ToLower(hi) {
			names = append(names, map[string]string{"TableName": n})
		}
	}
	return reply(req, http.StatusOK, "", map[string]any{"value": names}), nil
}

// reply is a JSON answer; code, if set, is the service's error code.
func reply(req *http.Request, status int, code string, body any) *http.Response {
	resp := &http.Response{StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Request: req}
	resp.Header.Set("Content-Type", "application/json;odata=minimalmetadata")
	if code != "" {
		resp.Header.Set("x-ms-error-code", code)
		body = map[string]any{"odata.error": map[string]any{"code": code, "message": map[string]string{"lang": "en-US", "value": code}}}
	}
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	return resp
}

// batchReply is a transaction's success: the outer multipart holding an empty changeset.
func batchReply(req *http.Request) *http.Response {
	const body = "--batchresponse_f\r\nContent-Type: multipart/mixed; boundary=changesetresponse_f\r\n\r\n" +
		"--changesetresponse_f\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n" +
		"HTTP/1.1 204 No Content\r\n\r\n\r\n--changesetresponse_f--\r\n--batchresponse_f--\r\n"
	resp := &http.Response{StatusCode: http.StatusAccepted, Status: "202 Accepted", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Request: req, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
	resp.Header.Set("Content-Type", "multipart/mixed; boundary=batchresponse_f")
	return resp
}
