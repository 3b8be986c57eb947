package tsdb

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
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
	e := entity.Entity{AllowStrings: true}
	if err := e.Decode(body); err != nil {
		return 0, false, fmt.Errorf("tsdb: the tier layout's record: %w", err)
	}
	version := math.NaN()
	for _, p := range e.Props {
		if string(p.Name) == entity.ValueProperty {
			version = p.Value
		}
	}
	if _, ok := tierLayoutNames[version]; !ok {
		name, _ := e.String(formatNameProp)
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
	prefix := name + "t"
	f := filter.And(filter.Ge("TableName", prefix+"0"), filter.Lt("TableName", prefix+":")).String()
	for pager := service.NewListTablesPager(&aztables.ListTablesOptions{Filter: &f}); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return false, fmt.Errorf("tsdb: list tier tables: %w", err)
		}
		for _, tb := range page.Tables {
			if tb.Name == nil {
				continue
			}
			// A tier table is prefix, the step's digits, "p" and the period's digits (case
			// aside, names compare case-insensitively: "Abct..." is another database's).
			rest, ok := strings.CutPrefix(*tb.Name, prefix)
			step, period, found := strings.Cut(rest, "p")
			if _, err := strconv.ParseUint(step, 10, 64); ok && found && err == nil {
				if _, err := strconv.ParseUint(period, 10, 64); err == nil {
					return true, nil
				}
			}
		}
	}
	return false, nil
}
