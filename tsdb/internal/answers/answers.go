// Package answers is a database's table of kept answers (names.Answers(): name + "q"): the
// answers of queries one process computed, which every process sharing the database may
// use while they still stand (tsdb's Answers.Keep and Answers.Kept say when). It stores
// and reads opaque bytes by key, one entity a key; what the bytes hold, and whether they
// still stand, is tsdb's. The entity is in docs/format.md ("Kept answers").
package answers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
)

// The entity's keys and properties.
const (
	RowKey      = "a"
	Version     = 1
	versionProp = "V" // Edm.Double: Version
	keyProp     = "K" // Edm.String: the key
	partPrefix  = "D" // Edm.Binary: D0, D1, ...: the bytes, 64 KiB a part
)

// MaxKeyBytes is the longest key kept: a longer one is not (Put returns ErrTooLarge).
const MaxKeyBytes = 4 << 10

// PartBytes is the bytes of a part, and MaxParts the parts of an entity: Azure's 64 KiB a
// binary property, and 11 of them, base64 in the request's JSON, with the key, under 1 MiB
// (Azure's limit on an entity, which Azurite checks on the body of an upsert).
const (
	PartBytes = 64 << 10
	MaxParts  = 11
)

// MaxBytes is the most bytes a key keeps.
const MaxBytes = MaxParts * PartBytes

// ErrTooLarge is the error of a Put of a key or bytes over MaxKeyBytes or MaxBytes, before
// any request.
var ErrTooLarge = errors.New("tsdb: an answer too large to keep")

// Table is the answers table of a database. Safe for concurrent use.
type Table struct {
	client *aztables.Client
}

// New returns the table of client (names.Answers()).
func New(client *aztables.Client) *Table { return &Table{client: client} }

// PartitionKey is the PartitionKey of key's entity: the first 16 bytes of the SHA-256 of
// the key, in lowercase hex (a key may hold any character; keys cannot).
func PartitionKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// Body is the entity that keeps b for key.
func Body(key string, b []byte) ([]byte, error) {
	if len(key) > MaxKeyBytes || len(b) > MaxBytes {
		return nil, fmt.Errorf("%w: a key of %d bytes, %d bytes", ErrTooLarge, len(key), len(b))
	}
	body := entity.AppendKeys(nil, PartitionKey(key), RowKey)
	body = entity.AppendDouble(body, versionProp, Version)
	body = entity.AppendStringProperty(body, keyProp, key)
	for i := 0; i == 0 || i*PartBytes < len(b); i++ {
		body = entity.AppendBinary(body, partPrefix+strconv.Itoa(i), b[i*PartBytes:min(len(b), (i+1)*PartBytes)])
	}
	return entity.AppendEnd(body), nil
}

// Put keeps b for key, replacing what the key kept: one request (two more the first time,
// to create the table).
func (t *Table) Put(ctx context.Context, key string, b []byte) error {
	body, err := Body(key, b)
	if err != nil {
		return err
	}
	opts := &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace}
	_, err = t.client.UpsertEntity(ctx, body, opts)
	if azerr.IsTableGone(err) {
		if err = tablets.EnsureTable(ctx, t.client); err == nil {
			_, err = t.client.UpsertEntity(ctx, body, opts)
		}
	}
	if err != nil {
		return fmt.Errorf("tsdb: keep an answer: %w", err)
	}
	return nil
}

// Get returns what key keeps, and when it was written (the service's time); ok false: none,
// or an entity of another version (a newer program's) or of another key (the same
// PartitionKey). One request.
func (t *Table) Get(ctx context.Context, key string) (b []byte, written time.Time, ok bool, err error) {
	resp, err := t.client.GetEntity(ctx, PartitionKey(key), RowKey, nil)
	switch {
	case azerr.IsStatus(err, http.StatusNotFound):
		return nil, time.Time{}, false, nil
	case err != nil:
		return nil, time.Time{}, false, fmt.Errorf("tsdb: read a kept answer: %w", err)
	}
	b, written, ok, err = Decode(resp.Value, key)
	if err != nil {
		return nil, time.Time{}, false, fmt.Errorf("tsdb: read a kept answer: %w", err)
	}
	return b, written, ok, nil
}

// Decode returns the bytes an entity keeps for key; ok false for an entity of another
// version or key. It never panics.
func Decode(raw []byte, key string) (b []byte, written time.Time, ok bool, err error) {
	var props map[string]json.RawMessage
	if err := json.Unmarshal(raw, &props); err != nil {
		return nil, time.Time{}, false, err
	}
	var version float64
	var stored string
	if err := json.Unmarshal(props[versionProp], &version); err != nil || version != Version {
		return nil, time.Time{}, false, nil
	}
	if err := json.Unmarshal(props[keyProp], &stored); err != nil || stored != key {
		return nil, time.Time{}, false, nil
	}
	if ts, found := props["Timestamp"]; found {
		_ = json.Unmarshal(ts, &written) // for information: a reply without one is as good
	}
	for i := 0; ; i++ {
		part, found := props[partPrefix+strconv.Itoa(i)]
		if !found {
			if i == 0 {
				return nil, time.Time{}, false, errors.New("an answer without bytes")
			}
			return b, written, true, nil
		}
		var p []byte
		if err := json.Unmarshal(part, &p); err != nil {
			return nil, time.Time{}, false, fmt.Errorf("part %d: %w", i, err)
		}
		b = append(b, p...)
	}
}

// Expire deletes the answers last written before before: one query of the table's keys
// and times, and a request an answer deleted (conditional on the ETag listed: an answer
// written again meanwhile stays). A table that does not exist has none.
func (t *Table) Expire(ctx context.Context, before time.Time) (int, error) {
	q := pager.SubQuery{Select: "PartitionKey,RowKey,Timestamp"}
	deleted := 0
	for page, err := range pager.Each(ctx, t.client, q, 0) {
		if azerr.IsTableGone(err) {
			return deleted, nil
		}
		if err != nil {
			return deleted, fmt.Errorf("tsdb: list kept answers: %w", err)
		}
		for _, raw := range page.Entities {
			var e struct {
				PartitionKey, RowKey string
				Timestamp            time.Time
				ETag                 string `json:"odata.etag"`
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				return deleted, fmt.Errorf("tsdb: list kept answers: %w", err)
			}
			if !e.Timestamp.Before(before) {
				continue
			}
			etag := azcore.ETag(e.ETag)
			if e.ETag == "" {
				etag = azcore.ETagAny
			}
			_, err := t.client.DeleteEntity(ctx, e.PartitionKey, e.RowKey, &aztables.DeleteEntityOptions{IfMatch: &etag})
			switch {
			case err == nil:
				deleted++
			case azerr.IsStatus(err, http.StatusNotFound), azerr.IsStatus(err, http.StatusPreconditionFailed):
			default:
				return deleted, fmt.Errorf("tsdb: expire a kept answer: %w", err)
			}
		}
	}
	return deleted, nil
}
