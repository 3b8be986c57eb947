// Package catalog owns a tsdb database's catalog table (its base name + "m"): what every
// process of the database must agree on. Its entities are specified in docs/format.md ("The
// catalog"):
//
//	partition "dropped"         a table Retain dropped (RowKey its name): never created again
//	partitions "l0" .. "lf"     the label-set registry: RowKey a series key, L its label set
//	partition "progress"        how far a background task got (RowKey the task)
//
// A Catalog reads and writes the dropped tables, the registry (with a bounded cache of the
// label sets registered) and the progress records. The other partitions of the table (the
// fold lease, the dirty markers of the tiers, the raw format's record) belong to the parts
// that use them, which write them through Catalog.Client. It is a leaf: it depends on no
// other part of the database.
package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
)

// LabelsProperty is the label set's property in the registry and the index: their entities
// are specified in docs/format.md ("The catalog", "The series index").
const LabelsProperty = "L"

// MetricPartition is the index partition of the label sets with metric name name: "n" and
// the name when it is short and valid in a key, else "h" and the first 16 bytes of its
// SHA-256 in hex. Every label set's partition is in ["h", "o").
func MetricPartition(name string) string {
	if len(name) <= 200 && entity.ValidateKey("n"+name) == nil {
		return "n" + name
	}
	sum := sha256.Sum256([]byte(name))
	return "h" + hex.EncodeToString(sum[:16])
}

// LabelPartitionsFrom and LabelPartitionsTo bound every label set's index Partition: [LabelPartitionsFrom, LabelPartitionsTo).
const LabelPartitionsFrom, LabelPartitionsTo = "h", "o"

// Catalog is a database's catalog table: its dropped tables, its label-set registry (with a
// bounded cache of the sets known registered) and the progress records. Safe for concurrent
// use.
type Catalog struct {
	// Client is the catalog table's: the parts that own other partitions write through it.
	Client *aztables.Client
	// labels are label sets known registered, by series key: what a Write needs to list a
	// series in a period's index (its partition and encoding), without reading the registry.
	labels *cache.Gen[string, Entry]
	// Prime, if set, may teach the cache many label sets at once (Remember) before a
	// Register of many unknown sets writes them: the database reads its newest index there
	// (set once, before the catalog is used).
	Prime func(ctx context.Context)
}

// Dropped is the catalog partition of dropped tables: RowKey the table's name.
const Dropped = "dropped"

// Entry is what the index entry of a label set needs: its index partition and encoding.
type Entry struct {
	Partition string // its index partition: MetricPartition of its name
	Encoded   []byte // labels.Append
}

// entryOverhead is about what an entry of the label cache costs besides its bytes: the
// key, the slice and string headers, the map's share.
const entryOverhead = 160

// EntryBytes is what CachedSeries allows an entry of the label cache: a generation
// holds CachedSeries times this many bytes (CachedSeries sets of up to 300 bytes encoded).
const EntryBytes = 512

func entryCost(k string, e Entry) int {
	return len(k) + len(e.Partition) + len(e.Encoded) + entryOverhead
}

// New returns the catalog of table client, caching the label sets of at least cachedSeries
// series (see tsdb.Options.CachedSeries).
func New(client *aztables.Client, cachedSeries int) *Catalog {
	return &Catalog{Client: client, labels: cache.New(2*cachedSeries*EntryBytes, entryCost)}
}

// NewEntry is the entry of a canonical label set.
func NewEntry(ls labels.Labels) Entry {
	return Entry{Partition: MetricPartition(ls.Get(labels.MetricName)), Encoded: labels.Append(nil, ls)}
}

// IsDropped reads whether Retain dropped the table name: one request.
func (c *Catalog) IsDropped(ctx context.Context, name string) (bool, error) {
	_, err := c.Client.GetEntity(ctx, Dropped, name, nil)
	switch {
	case err == nil:
		return true, nil
	case azerr.IsStatus(err, http.StatusNotFound):
		return false, nil
	}
	return false, fmt.Errorf("tsdb: catalog: %w", err)
}

// RecordDropped marks a table dropped (RowKey its name): one request.
func (c *Catalog) RecordDropped(ctx context.Context, name string) error {
	body := entity.AppendEnd(entity.AppendDouble(entity.AppendKeys(nil, Dropped, name), entity.ValueProperty, 1))
	if _, err := c.Client.UpsertEntity(ctx, body, nil); err != nil {
		return fmt.Errorf("tsdb: catalog: %w", err)
	}
	return nil
}

// EachDropped calls fn with the name of each table recorded dropped whose name is in [from,
// to): one query. A catalog that does not exist records none.
func (c *Catalog) EachDropped(ctx context.Context, from, to string, fn func(name string)) error {
	q := pager.SubQuery{Filter: filter.And(filter.Eq("PartitionKey", Dropped), filter.Ge("RowKey", from),
		filter.Lt("RowKey", to)).String(), Select: "RowKey"}
	var e entity.Entity
	for page, err := range pager.Each(ctx, c.Client, q, 0) {
		if azerr.IsTableGone(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tsdb: catalog: %w", err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return fmt.Errorf("tsdb: catalog: %w", err)
			}
			fn(string(e.RowKey))
		}
	}
	return nil
}

// RegistryPartition is the registry partition of a series key: "l" and its first hex digit.
func RegistryPartition(key string) string { return "l" + key[1:2] }

// Register records label sets in the registry, those the cache does not hold: in
// transactions (one per registry partition and 100 sets). It returns their keys. Every set is
// checked before any request. When PrimeAt or more sets are unknown, it calls Prime first
// (if set), which may teach the cache sets the registry holds (Remember): a process just
// started writes the series it serves again, and they are not written again.
func (c *Catalog) Register(ctx context.Context, sets []labels.Labels) ([]string, error) {
	keys := make([]string, len(sets))
	fresh := map[string]labels.Labels{}
	for i, ls := range sets {
		canon, err := labels.Canonical(ls)
		if err != nil {
			return nil, fmt.Errorf("tsdb: label set %d: %w", i, err)
		}
		keys[i] = labels.Key(canon)
		if _, known := c.labels.Get(keys[i]); known {
			continue
		}
		fresh[keys[i]] = canon
	}
	if len(fresh) >= PrimeAt && c.Prime != nil {
		c.Prime(ctx)
		for k := range fresh {
			if _, known := c.labels.Get(k); known {
				delete(fresh, k)
			}
		}
	}
	byPart := map[string][]aztables.TransactionAction{}
	entries := make(map[string]Entry, len(fresh))
	for _, k := range slices.Sorted(maps.Keys(fresh)) {
		e := NewEntry(fresh[k])
		entries[k] = e
		pk := RegistryPartition(k)
		body := entity.AppendEnd(entity.AppendBinary(entity.AppendKeys(nil, pk, k), LabelsProperty, e.Encoded))
		byPart[pk] = append(byPart[pk], aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: body})
	}
	if err := batch.SubmitPartitions(ctx, c.Client, byPart); err != nil {
		return nil, fmt.Errorf("tsdb: register label sets: %w", err)
	}
	for k, e := range entries {
		c.labels.Add(k, e)
	}
	return keys, nil
}

// PrimeAt is how many series a registration must not know before it primes its cache
// (Catalog.Prime, and the index's registrations of a period): a listing of a thousand
// entries costs a request, a transaction of a hundred another.
const PrimeAt = 100

// Remember caches the label set encoded of series, which the registry holds (an index
// entry's: the registry is written before the index); an encoding that does not decode to
// series' labels is an error, and not cached.
func (c *Catalog) Remember(series string, encoded []byte) error {
	e, err := entryOf(series, encoded)
	if err != nil {
		return err
	}
	c.labels.Add(series, e)
	return nil
}

// entryOf is the entry of series' label set encoded, read from the registry or an index
// entry: an error unless it decodes to a set whose key is series.
func entryOf(series string, encoded []byte) (Entry, error) {
	ls, err := labels.Decode(encoded)
	if err != nil {
		return Entry{}, fmt.Errorf("tsdb: registry entry of %s: %w", series, err)
	}
	if labels.Key(ls) != series {
		return Entry{}, fmt.Errorf("tsdb: registry entry of %s holds the labels of %s", series, labels.Key(ls))
	}
	return NewEntry(ls), nil
}

// LabelsOf returns the registry's entry for a series key (the cache's, else one request),
// and false for a plain series (a key the registry does not hold).
func (c *Catalog) LabelsOf(ctx context.Context, series string) (Entry, bool, error) {
	if !labels.IsKey(series) {
		return Entry{}, false, nil
	}
	if e, known := c.labels.Get(series); known {
		return e, true, nil
	}
	resp, err := c.Client.GetEntity(ctx, RegistryPartition(series), series, nil)
	if azerr.IsStatus(err, http.StatusNotFound) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("tsdb: registry: %w", err)
	}
	var stored struct{ L []byte }
	if err := json.Unmarshal(resp.Value, &stored); err != nil {
		return Entry{}, false, fmt.Errorf("tsdb: registry entry of %s: %w", series, err)
	}
	e, err := entryOf(series, stored.L)
	if err != nil {
		return Entry{}, false, err
	}
	c.labels.Add(series, e)
	return e, true, nil
}

// The progress entities of the catalog (docs/format.md, "The catalog").
const (
	Progress            = "progress" // PartitionKey; RowKey the task
	progressVersion     = 1
	progressVersionProp = "V" // Edm.Double: progressVersion
	progressCoveredProp = "T" // Edm.Double: the covered time, Unix milliseconds
	maxProgressAttempts = 20
	maxTaskBytes        = 64
)

// appendProgress is the body of task's progress entity.
func appendProgress(task string, ms int64) []byte {
	b := entity.AppendKeys(nil, Progress, task)
	b = entity.AppendDouble(b, progressVersionProp, progressVersion)
	return entity.AppendEnd(entity.AppendDouble(b, progressCoveredProp, float64(ms)))
}

// ReadProgress reads task's progress entity: its time (Unix milliseconds) and ETag; ok false:
// there is none.
func (c *Catalog) ReadProgress(ctx context.Context, task string) (ms int64, etag azcore.ETag, ok bool, err error) {
	resp, err := c.Client.GetEntity(ctx, Progress, task, nil)
	if azerr.IsStatus(err, http.StatusNotFound) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("tsdb: catalog: %w", err)
	}
	ms, err = decodeProgress(resp.Value)
	if err != nil {
		return 0, "", false, fmt.Errorf("tsdb: catalog: progress of %s: %w", task, err)
	}
	return ms, resp.ETag, true, nil
}

// decodeProgress returns the time of a progress entity, or why it cannot be read: another
// version (a newer program's, which this one must not overwrite), or no valid time.
func decodeProgress(raw []byte) (int64, error) {
	e := entity.Entity{AllowStrings: true} // a newer version may hold strings: say which version
	if err := e.Decode(raw); err != nil {
		return 0, err
	}
	version, covered := math.NaN(), math.NaN()
	for _, p := range e.Props {
		switch string(p.Name) {
		case progressVersionProp:
			version = p.Value
		case progressCoveredProp:
			covered = p.Value
		}
	}
	if version != progressVersion {
		return 0, fmt.Errorf("format version %v, not %d", version, progressVersion)
	}
	if covered != math.Trunc(covered) || covered < 0 || covered > float64(tablets.MaxTime.UnixMilli()) {
		return 0, fmt.Errorf("time %v is not a whole number of milliseconds in range", covered)
	}
	return int64(covered), nil
}

// RaiseProgress records ms as task's progress unless the record is as late already.
func (c *Catalog) RaiseProgress(ctx context.Context, task string, ms int64) error {
	body := appendProgress(task, ms)
	for range maxProgressAttempts {
		stored, etag, ok, err := c.ReadProgress(ctx, task)
		switch {
		case err != nil:
			return err
		case ok && stored >= ms:
			return nil
		case ok:
			_, err = c.Client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		default:
			_, err = c.Client.AddEntity(ctx, body, nil)
		}
		switch {
		case err == nil:
			return nil
		case azerr.IsStatus(err, http.StatusPreconditionFailed), azerr.IsStatus(err, http.StatusConflict), azerr.IsStatus(err, http.StatusNotFound):
			// Written, inserted or deleted since the read (by another process, or by this
			// one's request whose reply was lost and retried): read again.
		default:
			return fmt.Errorf("tsdb: catalog: %w", err)
		}
	}
	return fmt.Errorf("the record still changed after %d attempts", maxProgressAttempts)
}

// CheckTask checks a task name: 1 to 64 letters, digits, '-' or '_' (a RowKey of the
// catalog).
func CheckTask(task string) error {
	ok := task != "" && len(task) <= maxTaskBytes
	for _, c := range task {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_')
	}
	if !ok {
		return fmt.Errorf("tsdb: %w: task name %q is not 1 to %d letters, digits, '-' or '_'", tablets.ErrInvalidOptions, task, maxTaskBytes)
	}
	return nil
}

// LabelsCache is the cache of the label sets known registered (for tests of its bound).
func (c *Catalog) LabelsCache() *cache.Gen[string, Entry] { return c.labels }
