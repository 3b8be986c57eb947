// The entities of the last Fold, recorded before it deletes: what lets a Fold that follows
// one cut off in its deletes only finish them.

package staging

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/tsdb/internal/azerr"
)

const (
	// FoldEntitiesKey is the RowKey, in FoldsPartition, of the record of the entities the
	// last Fold moved (docs/format.md, "The folds' entities").
	FoldEntitiesKey = "e"
	// foldEntitiesVersion is its V.
	foldEntitiesVersion = 1
	// foldEntitiesPart bounds the bytes of one of its properties E0, E1, ... (Azure's
	// 64 KiB a binary property), and foldEntitiesParts their number: ten of them as
	// base64 are 800 KB, under the 1 MiB of an entity.
	foldEntitiesPart  = 60_000
	foldEntitiesParts = 10
)

// encodeFoldEntities is the list of E: each entity sorted by PartitionKey then RowKey, as
// three strings (PartitionKey, RowKey, ETag), each a uvarint length and its bytes.
func encodeFoldEntities(etags map[[2]string]string) []byte {
	var b []byte
	for _, k := range slices.SortedFunc(maps.Keys(etags), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		for _, s := range []string{k[0], k[1], etags[k]} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	}
	return b
}

// decodeFoldEntities is encodeFoldEntities' inverse, or an error for a malformed list.
func decodeFoldEntities(b []byte) (map[[2]string]string, error) {
	out := map[[2]string]string{}
	for len(b) > 0 {
		var f [3]string
		for i := range f {
			n, w := binary.Uvarint(b)
			if w <= 0 || n > uint64(len(b)-w) {
				return nil, fmt.Errorf("staging: the folds' entities: a malformed list")
			}
			f[i] = string(b[w : w+int(n)])
			b = b[w+int(n):]
		}
		out[[2]string{f[0], f[1]}] = f[2]
	}
	return out, nil
}

// foldEntitiesBody is the record's entity: the horizon of the Fold and the entities it
// read, by key, at the ETags it read them. Without room for the list (more than
// foldEntitiesParts parts), it holds none: a Fold after it then folds as if there were none.
func foldEntitiesBody(horizon uint64, etags map[[2]string]string) ([]byte, error) {
	m := map[string]any{
		"PartitionKey": FoldsPartition, "RowKey": FoldEntitiesKey,
		"V": float64(foldEntitiesVersion), "V@odata.type": "Edm.Double",
		"H": strconv.FormatUint(horizon, 10),
	}
	list := encodeFoldEntities(etags)
	if (len(list)+foldEntitiesPart-1)/foldEntitiesPart <= foldEntitiesParts {
		for i := 0; len(list) > 0; i++ {
			n := min(len(list), foldEntitiesPart)
			m["E"+strconv.Itoa(i)] = list[:n] // []byte marshals as base64
			m["E"+strconv.Itoa(i)+"@odata.type"] = "Edm.Binary"
			list = list[n:]
		}
	}
	return json.Marshal(m)
}

// recordFoldEntities records, before a Fold deletes anything, its horizon and the entities
// its rounds read (at the ETags read): a Fold cut off in its deletes has then written those
// entities' samples into the raw tables and recorded its change, and the Fold after it,
// finding only those entities at those ETags, deletes them without writing their samples
// again (foldedBefore).
func (st *Table) recordFoldEntities(ctx context.Context, horizon uint64, etags map[[2]string]string) error {
	body, err := foldEntitiesBody(horizon, etags)
	if err != nil {
		return err
	}
	if _, err := st.client.UpsertEntity(ctx, body, &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace}); err != nil {
		return fmt.Errorf("tsdb: fold: record its entities: %w", err)
	}
	return nil
}

// foldedBefore reports whether a Fold of the buckets before horizon recorded, before it
// began deleting, that it had folded every entity of etags at its ETag: their samples are
// in the raw tables and its change in the raw change log (it recorded both before), so that
// only their deletes are left. An entity written since, or rewritten (by a Delete), is not
// in that record: the Fold then folds as usual.
func (st *Table) foldedBefore(ctx context.Context, horizon uint64, etags map[[2]string]string) (bool, error) {
	if len(etags) == 0 {
		return false, nil
	}
	resp, err := st.client.GetEntity(ctx, FoldsPartition, FoldEntitiesKey, nil)
	if azerr.IsTableGone(err) { // no record (a 404 of the entity), or no table
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("tsdb: fold: read the last Fold's entities: %w", err)
	}
	h, folded, err := parseFoldEntities(resp.Value)
	if err != nil {
		return false, err
	}
	if h != strconv.FormatUint(horizon, 10) || folded == nil {
		return false, nil
	}
	for k, etag := range etags {
		if folded[k] != etag || etag == "" {
			return false, nil
		}
	}
	return true, nil
}

// parseFoldEntities reads the record's horizon and entities (nil: a version not known
// here, or a record without the list), or an error for a malformed record.
func parseFoldEntities(body []byte) (string, map[[2]string]string, error) {
	var rec map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&rec); err != nil {
		return "", nil, fmt.Errorf("tsdb: fold: the last Fold's entities: %w", err)
	}
	h, _ := rec["H"].(string)
	if v, _ := rec["V"].(json.Number); v.String() != strconv.Itoa(foldEntitiesVersion) {
		return h, nil, nil // another version: not known here, so not relied on
	}
	var list []byte
	for i := range foldEntitiesParts {
		s, ok := rec["E"+strconv.Itoa(i)].(string)
		if !ok {
			break
		}
		part, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "", nil, fmt.Errorf("tsdb: fold: the last Fold's entities: %w", err)
		}
		list = append(list, part...)
	}
	if len(list) == 0 {
		return h, nil, nil
	}
	folded, err := decodeFoldEntities(list)
	if err != nil {
		return "", nil, fmt.Errorf("tsdb: fold: %w", err)
	}
	return h, folded, nil
}
