package batch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/filter"
)

// Error is a failed transaction: the service's error code and the index of the operation
// that failed (-1 when the reply does not say). It unwraps to the *azcore.ResponseError.
type Error struct {
	Code   string
	Index  int
	Status int
	Err    error
}

func (e *Error) Error() string {
	if e.Code == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("transaction failed: %s (HTTP %d) at operation %d: %v", e.Code, e.Status, e.Index, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches tablets.ErrThrottled when the failed operation's answer says "busy".
func (e *Error) Is(target error) bool {
	return target == tablets.ErrThrottled && tablets.Throttled(e.Status, e.Code)
}

// IsConflict reports a write that failed because an entity it was conditional on changed or
// went (412, 404), or one it would insert appeared (409): in a transaction's reply or a
// single request's. A read-compute-write that gets one starts again from the read.
func IsConflict(err error) bool {
	status := 0
	var be *Error
	var re *azcore.ResponseError
	switch {
	case errors.As(err, &be):
		status = be.Status
		switch be.Code {
		case string(aztables.UpdateConditionNotSatisfied), string(aztables.ResourceNotFound), string(aztables.EntityAlreadyExists):
			return true
		}
	case errors.As(err, &re):
		status = re.StatusCode
	}
	return status == http.StatusPreconditionFailed || status == http.StatusNotFound || status == http.StatusConflict
}

// Submitter is the part of *aztables.Client a transaction needs.
type Submitter interface {
	SubmitTransaction(ctx context.Context, actions []aztables.TransactionAction, opts *aztables.SubmitTransactionOptions) (aztables.TransactionResponse, error)
	NewListEntitiesPager(*aztables.ListEntitiesOptions) *runtime.Pager[aztables.ListEntitiesResponse]
}

// Submit sends the operations of one partition as one transaction. A failure comes back as
// *Error where the service answered.
//
// aztables v1.4.1 writes the keys of a transaction's operations into their URLs without
// doubling single quotes (its single-entity calls do double them), so a PartitionKey with a
// quote would address another entity: "O”Brien" would land on "O'Brien". aztables takes
// those URL keys from the entity's own PartitionKey and RowKey, so for a key with a quote
// Submit hands it the keys already doubled (see QuoteKeys): the operation's URL then
// addresses the right entity, which is what the service writes (the keys of an update's
// URL are its address; the copies in its body are redundant). An insert (Add) has no keys
// in its URL: its body's keys are the entity's, so they are sent as they are (doubled, a
// block added under a name with a quote was stored with the quote doubled, and every later conditional
// write of it missed). The transaction stays one request, whatever the name.
func Submit(ctx context.Context, client Submitter, partitionKey string, actions []aztables.TransactionAction) error {
	if strings.ContainsRune(partitionKey, '\'') || slices.ContainsFunc(actions, hasQuotedRowKey) {
		quoted := make([]aztables.TransactionAction, len(actions))
		for i, a := range actions {
			if a.ActionType == aztables.TransactionTypeAdd {
				quoted[i] = a // keys in the body only
				continue
			}
			body, err := QuoteKeys(a.Entity)
			if err != nil {
				return fmt.Errorf("batch: operation %d: %w", i, err)
			}
			a.Entity = body
			quoted[i] = a
		}
		actions = quoted
	}
	_, err := client.SubmitTransaction(ctx, actions, nil)
	if err == nil {
		return nil
	}
	return Explain(err)
}

// SubmitETags is Submit, and on success the ETag of each operation's entity as the reply
// gives it, in the order of actions: nil where the reply does not say (aztables keeps
// none: the reply is read again here, as the pipeline buffered it). A write needs no
// ETag: a caller that has none just knows less.
func SubmitETags(ctx context.Context, client Submitter, partitionKey string, actions []aztables.TransactionAction) ([]string, error) {
	var resp *http.Response
	if err := Submit(runtime.WithCaptureResponse(ctx, &resp), client, partitionKey, actions); err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, nil
	}
	body, err := runtime.Payload(resp)
	if err != nil {
		return nil, nil
	}
	return replyETags(body, resp.Header.Get("Content-Type"), len(actions)), nil
}

// replyETags reads the ETags of the n operations of a successful batch reply, in order (nil
// unless it holds n responses, each with one).
func replyETags(body []byte, contentType string, n int) []string {
	if len(body) == 0 || body[0] == '{' {
		return nil
	}
	var etags []string
	ok := true
	walkParts(body, contentType, 0, func(part []byte) bool {
		r, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(part)), nil)
		if err != nil || r.StatusCode >= 300 || r.Header.Get("ETag") == "" {
			ok = false
			return false
		}
		etags = append(etags, r.Header.Get("ETag"))
		return true
	})
	if !ok || len(etags) != n {
		return nil
	}
	return etags
}

func hasQuotedRowKey(a aztables.TransactionAction) bool {
	if a.ActionType == aztables.TransactionTypeAdd {
		return false
	}
	var keys struct{ RowKey string }
	return bytes.IndexByte(a.Entity, '\'') >= 0 && json.Unmarshal(a.Entity, &keys) == nil && strings.ContainsRune(keys.RowKey, '\'')
}

// QuoteKeys returns an entity body whose PartitionKey and RowKey have their single quotes
// doubled, the other properties as they were (in the same order, byte for byte).
func QuoteKeys(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("entity body is not a JSON object")
	}
	out := []byte{'{'}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		if name == "PartitionKey" || name == "RowKey" {
			var key string
			if err := json.Unmarshal(value, &key); err != nil {
				return nil, fmt.Errorf("%s is not a string", name)
			}
			if value, err = json.Marshal(strings.ReplaceAll(key, "'", "''")); err != nil {
				return nil, err
			}
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		n, _ := json.Marshal(name)
		out = append(append(append(out, n...), ':'), value...)
	}
	return append(out, '}'), nil
}

// Explain turns a transaction's error into *Error, parsing the failed operation out of the
// batch reply; errors that are not the service's answer are returned as they are.
func Explain(err error) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return err
	}
	e := &Error{Code: re.ErrorCode, Index: -1, Status: re.StatusCode, Err: err}
	if re.RawResponse != nil {
		if status, code, index, ok := parseReply(re.RawResponse); ok {
			e.Status, e.Code, e.Index = status, code, index
		}
	}
	return e
}

// parseReply finds the failed inner response of a batch reply.
func parseReply(resp *http.Response) (status int, code string, index int, ok bool) {
	body, err := readBody(resp)
	if err != nil || len(body) == 0 {
		return 0, "", 0, false
	}
	if body[0] == '{' {
		status, code, index = resp.StatusCode, "", -1
		code, index = parseODataError(body)
		return resp.StatusCode, code, index, code != ""
	}
	// Outer multipart (batch) holding an inner multipart (changeset) of HTTP responses.
	var found bool
	walkParts(body, resp.Header.Get("Content-Type"), 0, func(part []byte) bool {
		r, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(part)), nil)
		if err != nil || r.StatusCode < 400 {
			return true
		}
		inner, _ := io.ReadAll(r.Body)
		status = r.StatusCode
		code, index = parseODataError(inner)
		if code == "" {
			code = r.Header.Get("x-ms-error-code")
		}
		found = true
		return false
	})
	return status, code, index, found
}

// walkParts calls fn with each leaf part of a (possibly nested) multipart body.
func walkParts(body []byte, contentType string, depth int, fn func([]byte) bool) bool {
	if depth > 2 {
		return true
	}
	boundary := ""
	if _, params, err := mime.ParseMediaType(contentType); err == nil {
		boundary = params["boundary"]
	}
	if boundary == "" {
		// aztables reads the boundary from the first line, as the service's framing allows.
		line, _, _ := bytes.Cut(body, []byte("\n"))
		boundary = strings.TrimPrefix(strings.TrimSpace(string(line)), "--")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextPart()
		if err != nil {
			return true
		}
		data, err := io.ReadAll(p)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return true
		}
		if ct := p.Header.Get("Content-Type"); strings.HasPrefix(ct, "multipart/") {
			if !walkParts(data, ct, depth+1, fn) {
				return false
			}
			continue
		}
		if !fn(data) {
			return false
		}
	}
}

// parseODataError reads {"odata.error":{"code":..,"message":{"value":"N:..."}}}.
func parseODataError(body []byte) (code string, index int) {
	var reply struct {
		Error struct {
			Code    string `json:"code"`
			Message struct {
				Value string `json:"value"`
			} `json:"message"`
		} `json:"odata.error"`
	}
	if json.Unmarshal(body, &reply) != nil {
		return "", -1
	}
	index = -1
	if head, _, ok := strings.Cut(reply.Error.Message.Value, ":"); ok {
		if n, err := strconv.Atoi(head); err == nil {
			index = n
		}
	}
	return reply.Error.Code, index
}

func readBody(resp *http.Response) ([]byte, error) {
	if resp.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return b, err
}

// Run calls do for transactions 0..n-1 with at most concurrency at once and returns each
// one's error. It stops starting new ones once ctx is done (they get ctx's error). One
// transaction is done in the caller's goroutine: a fold writes many series at once, each
// mostly one transaction, and a goroutine more for each doubled the goroutines of a
// fold (the soak's goroutine target samples them).
func Run(ctx context.Context, concurrency, n int, do func(ctx context.Context, i int) error) []error {
	return RunPaced(ctx, concurrency, n, 0, do)
}

// RunPaced is Run, but it starts transaction i no earlier than span*i/n after it began:
// the transactions begin evenly over span (at most concurrency at once all the same), so
// that a burst of them (a fold's) does not take the whole account for its length. A span
// of 0 is Run's pace, as fast as concurrency allows. Waiting ends with ctx, as starting
// does.
func RunPaced(ctx context.Context, concurrency, n int, span time.Duration, do func(ctx context.Context, i int) error) []error {
	errs := make([]error, n)
	if n == 1 {
		if errs[0] = ctx.Err(); errs[0] == nil {
			errs[0] = do(ctx, 0)
		}
		return errs
	}
	if concurrency < 1 {
		concurrency = 1
	}
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	pace := NewPace(span, n)
	for i := range n {
		if errs[i] = ctx.Err(); errs[i] != nil {
			continue // a free slot and a done ctx at once: select would pick either
		}
		if pace.Wait(ctx, i) != nil {
			errs[i] = ctx.Err()
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = do(ctx, i)
		}()
	}
	wg.Wait()
	return errs
}

// A Pace spreads n works evenly over a span from when it was made: work i may begin no
// earlier than span*i/n after (RunPaced's transactions, a Rollup's groups). The zero Pace
// waits for nothing.
type Pace struct {
	began time.Time
	span  time.Duration
	n     int
}

// NewPace returns the Pace of n works over span, beginning now (span <= 0: none).
func NewPace(span time.Duration, n int) Pace {
	if span <= 0 || n <= 0 {
		return Pace{}
	}
	return Pace{began: time.Now(), span: span, n: n}
}

// Paced reports whether p waits at all.
func (p Pace) Paced() bool { return p.span > 0 }

// Wait returns once work i may begin (at once for i <= 0, or where that is past), or with
// ctx's cause.
func (p Pace) Wait(ctx context.Context, i int) error {
	if p.span <= 0 || i <= 0 {
		return nil
	}
	d := time.Until(p.began.Add(p.span * time.Duration(i) / time.Duration(p.n)))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// DeleteRows deletes entities of one partition in one transaction (at most
// MaxBatchOperations keys). A row that is already gone (a retried transaction that was
// applied before its reply was lost, or a concurrent delete) fails the whole transaction with
// ResourceNotFound: then the keys that still exist are read in one query and only those are
// sent again, so deleting what is not there succeeds.
func DeleteRows(ctx context.Context, client Submitter, partitionKey string, rowKeys []string) error {
	listed := false
	for len(rowKeys) > 0 {
		actions := make([]aztables.TransactionAction, len(rowKeys))
		for i, rk := range rowKeys {
			actions[i] = aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, Entity: KeysBody(partitionKey, rk)}
		}
		err := Submit(ctx, client, partitionKey, actions)
		var be *Error
		if !errors.As(err, &be) || be.Code != string(aztables.ResourceNotFound) || be.Index < 0 || be.Index >= len(rowKeys) {
			return err
		}
		if !listed {
			listed = true
			if rowKeys, err = existing(ctx, client, partitionKey, rowKeys); err != nil {
				return err
			}
			continue
		}
		// Deleted concurrently since the listing: drop that one key.
		rowKeys = append(rowKeys[:be.Index:be.Index], rowKeys[be.Index+1:]...)
	}
	return nil
}

// existing returns the keys of rowKeys that are in the table, in one query over their range.
func existing(ctx context.Context, client Submitter, partitionKey string, rowKeys []string) ([]string, error) {
	lo, hi := slices.Min(rowKeys), slices.Max(rowKeys)
	f := filter.And(filter.Eq("PartitionKey", partitionKey), filter.Ge("RowKey", lo), filter.Le("RowKey", hi)).String()
	sel := "RowKey"
	want := make(map[string]bool, len(rowKeys))
	for _, rk := range rowKeys {
		want[rk] = true
	}
	var found []string
	for p := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &f, Select: &sel}); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Entities {
			var keys struct{ RowKey string }
			if err := json.Unmarshal(raw, &keys); err != nil {
				return nil, err
			}
			if want[keys.RowKey] {
				found = append(found, keys.RowKey)
			}
		}
	}
	return found, nil
}

// KeysBody is {"PartitionKey":pk,"RowKey":rk}: the entity of a delete operation.
func KeysBody(pk, rk string) []byte {
	b, _ := json.Marshal(struct {
		PartitionKey string
		RowKey       string
	}{pk, rk})
	return b
}
