package tsdb

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

// tsdb owns its raw format: a database made by this version stores its raw points in the
// chunked layout at a millisecond, with its default partitions and chunk sizes (the
// format staging, the Fold and the scanning rollup need), and records so in its catalog
// (docs/format.md, "The catalog": partition "format", RowKey "raw").
//
// A database made before the record (no record, raw tables present) keeps the layout it was
// written with: Options.Layout, else the advanced layout, the default of those versions.
// This is the one compatibility path: such a database is read, written, rolled up and
// retained as before (small writes are staged only if its layout is chunked at a
// millisecond). Opening it with a layout that is chunked at a millisecond with the
// defaults records the format, as it is then that of a new database.

// catalogFormat is the catalog partition of the formats a database records.
const catalogFormat = "format"

// formatRawKey is the RowKey of the raw format's record.
const formatRawKey = "raw"

// rawFormatVersion is the version of the raw format a database records: 1, the chunked
// layout at a millisecond with its defaults.
const rawFormatVersion = 1

// rawFormatName is the record's L, for people reading the catalog.
const rawFormatName = "chunked/1ms"

// formatNameProp is the record's property naming the format.
const formatNameProp = "L"

// chunkedMillisecond is the raw layout of a database made by this version.
func chunkedMillisecond(c *aztables.Client) (tablets.Store, error) {
	return chunked.New(c, &chunked.Options{Resolution: time.Millisecond})
}

// legacyLayout is the layout of a database made before the format record and opened
// without Options.Layout: the default of those versions.
func legacyLayout(c *aztables.Client) (tablets.Store, error) { return advanced.New(c, nil) }

// isChunkedMillisecond reports whether a raw store is in the recorded format: chunked, at a
// millisecond, its partitions and chunk sizes the defaults (its concurrency is free).
func isChunkedMillisecond(s tablets.Store) bool {
	c, ok := s.(*chunked.Store)
	if !ok {
		return false
	}
	o := c.Options()
	return o.Resolution == time.Millisecond && o.PartitionFactor == chunked.DefaultPartitionFactor && o.MaxChunkBytes == chunked.DefaultMaxChunkBytes
}

// offlineStore makes the store of layout on a client that sends nothing: to check options
// and formats before any request.
func offlineStore(name string, layout func(*aztables.Client) (tablets.Store, error)) (tablets.Store, error) {
	offline, err := aztables.NewClientWithNoCredential("https://account.invalid/"+naming.Names{Base: name}.RawTable(0), nil)
	if err != nil {
		return nil, err
	}
	return layout(offline)
}

// chooseLayout decides the raw layout of database name, whose catalog exists, as the
// package comment above says, from its format records (readFormats): for a database without
// the record, a request to list a raw table and one to record the format (or, with a raw
// table, one to read the records again). given is
// Options.Layout (nil: none given).
func chooseLayout(ctx context.Context, service *aztables.ServiceClient, name string, catalog *aztables.Client, formats formatRecords,
	given func(*aztables.Client) (tablets.Store, error)) (func(*aztables.Client) (tablets.Store, error), error) {
	recorded, err := readRawFormat(formats)
	if err != nil {
		return nil, err
	}
	givenChunkedMs := false
	if given != nil {
		s, err := offlineStore(name, given)
		if err != nil {
			return nil, fmt.Errorf("tsdb: %w", err)
		}
		givenChunkedMs = isChunkedMillisecond(s)
	}
	switch {
	case recorded && given == nil:
		return chunkedMillisecond, nil
	case recorded && !givenChunkedMs:
		return nil, fmt.Errorf("tsdb: %w: database %s stores its raw points %s (its catalog says so); Options.Layout gives another layout",
			tablets.ErrInvalidOptions, name, rawFormatName)
	case recorded:
		return given, nil // the recorded format, at the concurrency given
	case given != nil:
		if givenChunkedMs {
			if err := recordRawFormat(ctx, catalog); err != nil {
				return nil, err
			}
		}
		return given, nil
	}
	legacy, err := hasRawTables(ctx, service, name)
	if err != nil {
		return nil, err
	}
	if legacy {
		// A process that makes a database records its format before it makes any raw
		// table, but formats were read before this listing: the table may be of a process
		// that opened the new database meanwhile. Only a table with no record after it is
		// a database made before the record. (Without this read, of three servers opening
		// a new database at once, one took it for an old one and wrote its points in the
		// advanced layout, where no reader looked: soak run 111.)
		again, err := readFormats(ctx, catalog)
		if err != nil {
			return nil, err
		}
		recorded, err := readRawFormat(again)
		switch {
		case err != nil:
			return nil, err
		case recorded:
			return chunkedMillisecond, nil
		}
		return legacyLayout, nil
	}
	if err := recordRawFormat(ctx, catalog); err != nil {
		return nil, err
	}
	return chunkedMillisecond, nil
}

// readRawFormat reads whether the catalog's format records (readFormats) hold the raw
// format's. A record of another version is an error: a later version made the database.
func readRawFormat(formats formatRecords) (bool, error) {
	body, ok := formats[formatRawKey]
	if !ok {
		return false, nil
	}
	version, name, err := recordVersion(body)
	if err != nil {
		return false, fmt.Errorf("tsdb: the raw format's record: %w", err)
	}
	if version != rawFormatVersion {
		return false, fmt.Errorf("tsdb: the database's raw format is version %v (%q): this version reads version %d", version, name, rawFormatVersion)
	}
	return true, nil
}

// formatRecords are the records of the catalog's partition "format", by RowKey, as read.
type formatRecords map[string][]byte

// readFormats reads the catalog's format records: one query (a page: the partition holds
// two records).
func readFormats(ctx context.Context, catalog *aztables.Client) (formatRecords, error) {
	f := filter.Eq("PartitionKey", catalogFormat).String()
	out := formatRecords{}
	for pager := catalog.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &f}); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("tsdb: read the formats: %w", err)
		}
		for _, raw := range page.Entities {
			e := entity.Entity{AllowStrings: true}
			if err := e.Decode(raw); err != nil {
				return nil, fmt.Errorf("tsdb: a format record: %w", err)
			}
			out[string(e.RowKey)] = raw
		}
	}
	return out, nil
}

// recordRawFormat records the raw format in the catalog (an insert: another process may
// have recorded it first, which is the same record).
func recordRawFormat(ctx context.Context, catalog *aztables.Client) error {
	if _, err := catalog.AddEntity(ctx, rawFormatBody(), nil); err != nil && !azerr.IsStatus(err, http.StatusConflict) {
		return fmt.Errorf("tsdb: record the raw format: %w", err)
	}
	return nil
}

// rawFormatBody is the raw format's record (docs/format.md, "The catalog").
func rawFormatBody() []byte {
	body := entity.AppendKeys(nil, catalogFormat, formatRawKey)
	body = entity.AppendDouble(body, entity.ValueProperty, rawFormatVersion)
	return entity.AppendEnd(entity.AppendStringProperty(body, formatNameProp, rawFormatName))
}

// hasRawTables reports whether database name has a raw table (one request, unless other
// databases' tables share the prefix): a database made before the format record.
func hasRawTables(ctx context.Context, service *aztables.ServiceClient, name string) (bool, error) {
	return hasTables(ctx, service, name+"r", "raw", func(rest string) bool {
		_, err := strconv.ParseUint(rest, 10, 64)
		return err == nil
	})
}

// hasTables reports whether a table is named prefix followed by a rest that is accepts
// (one request, unless other databases' tables share the prefix): the tables of kind (for
// errors) of a database, whose names go on with a digit.
func hasTables(ctx context.Context, service *aztables.ServiceClient, prefix, kind string, accepts func(rest string) bool) (bool, error) {
	// Digits only follow the prefix ("0" to "9"; ":" sorts right after "9").
	f := filter.And(filter.Ge("TableName", prefix+"0"), filter.Lt("TableName", prefix+":")).String()
	for pager := service.NewListTablesPager(&aztables.ListTablesOptions{Filter: &f}); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return false, fmt.Errorf("tsdb: list %s tables: %w", kind, err)
		}
		for _, tb := range page.Tables {
			if tb.Name == nil {
				continue
			}
			// Table names compare case-insensitively: another database "Abc" has tables
			// "Abcr..." listed here; and "abcr0x" is another database's prefix.
			if rest, ok := strings.CutPrefix(*tb.Name, prefix); ok && accepts(rest) {
				return true, nil
			}
		}
	}
	return false, nil
}

// recordVersion reads a format record's version (V, NaN without one) and name (L).
func recordVersion(body []byte) (float64, string, error) {
	e := entity.Entity{AllowStrings: true}
	if err := e.Decode(body); err != nil {
		return 0, "", err
	}
	version := math.NaN()
	for _, p := range e.Props {
		if string(p.Name) == entity.ValueProperty {
			version = p.Value
		}
	}
	name, _ := e.String(formatNameProp)
	return version, string(name), nil
}
