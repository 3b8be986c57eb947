package tsdb

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/tiers"
)

// tsdb records how its tier tables key their blocks (docs/format.md, "The catalog":
// partition "format", RowKey "tiers"; "Packed tier blocks"), decided once, by the first
// process of this version that opens the database:
//
//   - a database with no tier table yet (a new one, or one never rolled up) records the
//     packed layout: a rollup writes up to 100 series' blocks in a transaction;
//   - a database with tier tables and no record was rolled up by an earlier version, in the
//     series layout (a block's partition is its series): it records that, and keeps it.
//
// The record, not the tables, decides from then on: Retain may drop every tier table, and
// the layout must not change under processes that hold it.

// formatTiersKey is the RowKey of the tier layout's record.
const formatTiersKey = "tiers"

// The versions of the tier layout's record (V), and their names (L, for people).
const (
	tierLayoutSeries = 1 // "series": PartitionKey the series, RowKey the block's start
	tierLayoutPacked = 2 // "packed": PartitionKey the series' first two characters, RowKey the series and start
)

var tierLayoutNames = map[float64]string{tierLayoutSeries: "series", tierLayoutPacked: "packed"}

// chooseTierLayout reads (or decides and records) the tier layout of database name, whose
// catalog exists, from its format records (readFormats): for a database without the
// record, a request to list its tier tables and one to record the layout.
func chooseTierLayout(ctx context.Context, service *aztables.ServiceClient, name string, catalog *aztables.Client, formats formatRecords) (tiers.Layout, error) {
	if l, ok, err := readTierLayout(formats); err != nil || ok {
		return l, err
	}
	version := float64(tierLayoutPacked)
	legacy, err := hasTierTables(ctx, service, name)
	if err != nil {
		return 0, err
	}
	if legacy {
		version = tierLayoutSeries
	}
	if _, err := catalog.AddEntity(ctx, tierLayoutBody(version), nil); err != nil {
		if !azerr.IsStatus(err, http.StatusConflict) {
			return 0, fmt.Errorf("tsdb: record the tier layout: %w", err)
		}
		// Another process recorded it first: its record decides.
		formats, err := readFormats(ctx, catalog)
		if err != nil {
			return 0, err
		}
		l, _, err := readTierLayout(formats)
		return l, err
	}
	return tierLayoutOf(version), nil
}

func tierLayoutOf(version float64) tiers.Layout {
	if version == tierLayoutPacked {
		return tiers.LayoutPacked
	}
	return tiers.LayoutSeries
}

// readTierLayout reads the tier layout's record among the catalog's format records
// (readFormats): ok is false without one. A record of another version is an error: a
// later version made the database.
func readTierLayout(formats formatRecords) (tiers.Layout, bool, error) {
	body, ok := formats[formatTiersKey]
	if !ok {
		return 0, false, nil
	}
	version, name, err := recordVersion(body)
	if err != nil {
		return 0, false, fmt.Errorf("tsdb: the tier layout's record: %w", err)
	}
	if _, ok := tierLayoutNames[version]; !ok {
		return 0, false, fmt.Errorf("tsdb: the database's tier layout is version %v (%q): this version reads versions %d and %d",
			version, name, tierLayoutSeries, tierLayoutPacked)
	}
	return tierLayoutOf(version), true, nil
}

// tierLayoutBody is the tier layout's record of version (docs/format.md, "The catalog").
func tierLayoutBody(version float64) []byte {
	body := entity.AppendKeys(nil, catalogFormat, formatTiersKey)
	body = entity.AppendDouble(body, entity.ValueProperty, version)
	return entity.AppendEnd(entity.AppendStringProperty(body, formatNameProp, tierLayoutNames[version]))
}

// hasTierTables reports whether database name has a tier table (one request, unless other
// databases' tables share the prefix): one rolled up by a version before the record.
func hasTierTables(ctx context.Context, service *aztables.ServiceClient, name string) (bool, error) {
	// A tier table is the prefix, the step's digits, "p" and the period's digits.
	return hasTables(ctx, service, name+"t", "tier", func(rest string) bool {
		step, period, found := strings.Cut(rest, "p")
		_, err1 := strconv.ParseUint(step, 10, 64)
		_, err2 := strconv.ParseUint(period, 10, 64)
		return found && err1 == nil && err2 == nil
	})
}
