package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/basic"
	"github.com/seed71701133/tablets/chunked"
)

// layoutOptions are the union of the layouts' options; zero means a layout's default.
type layoutOptions struct {
	Resolution      time.Duration
	Concurrency     int
	PartitionFactor time.Duration // advanced and chunked
	RowFactor       time.Duration // advanced only
}

// layoutDef is a store layout the command knows.
type layoutDef struct {
	name string
	open func(client *aztables.Client, o layoutOptions) (tablets.Store, error)
	// describe says how a store of this layout (from open) keeps points.
	describe func(tablets.Store) string
}

// defaultLayout is the --layout default.
const defaultLayout = "advanced"

// layouts in the order the demo runs them.
var layouts = []layoutDef{
	{name: "basic", open: openBasic, describe: func(s tablets.Store) string {
		return fmt.Sprintf("one entity per point, resolution %v", s.(*basic.Store).Options().Resolution)
	}},
	{name: "advanced", open: openAdvanced, describe: func(s tablets.Store) string {
		o := s.(*advanced.Store).Options()
		return fmt.Sprintf("%d points per entity (%v rows, %v partitions), resolution %v",
			o.RowFactor/o.Resolution, shortDuration(o.RowFactor), shortDuration(o.PartitionFactor), o.Resolution)
	}},
	{name: "chunked", open: openChunked, describe: func(s tablets.Store) string {
		o := s.(*chunked.Store).Options()
		return fmt.Sprintf("compressed chunks of up to %d KiB (%v partitions), exact times at %v",
			o.MaxChunkBytes>>10, shortDuration(o.PartitionFactor), o.Resolution)
	}},
}

func openBasic(client *aztables.Client, o layoutOptions) (tablets.Store, error) {
	if o.PartitionFactor != 0 || o.RowFactor != 0 {
		return nil, fmt.Errorf("%w: --partition-factor and --row-factor are not options of the basic layout", tablets.ErrInvalidOptions)
	}
	return basic.New(client, &basic.Options{Resolution: o.Resolution, Concurrency: o.Concurrency})
}

func openAdvanced(client *aztables.Client, o layoutOptions) (tablets.Store, error) {
	return advanced.New(client, &advanced.Options{PartitionFactor: o.PartitionFactor, RowFactor: o.RowFactor,
		Resolution: o.Resolution, Concurrency: o.Concurrency})
}

func openChunked(client *aztables.Client, o layoutOptions) (tablets.Store, error) {
	if o.RowFactor != 0 {
		return nil, fmt.Errorf("%w: --row-factor is an option of the advanced layout", tablets.ErrInvalidOptions)
	}
	return chunked.New(client, &chunked.Options{PartitionFactor: o.PartitionFactor, Resolution: o.Resolution, Concurrency: o.Concurrency})
}

// dbLayout is tsdb.Options.Layout for a --db database: nil (the database's own format) unless
// --layout names one, for a database made before tsdb recorded its format. Layout options
// without --layout are an error: they would be silently dropped.
func dbLayout(name string, o layoutOptions) (func(*aztables.Client) (tablets.Store, error), error) {
	if name == "" {
		if o != (layoutOptions{}) {
			return nil, fmt.Errorf("--resolution, --concurrency, --partition-factor and --row-factor are options of a --layout: with --db, name one only for a database made before tsdb recorded its raw format")
		}
		return nil, nil
	}
	def, err := findLayout(name)
	if err != nil {
		return nil, err
	}
	return func(c *aztables.Client) (tablets.Store, error) { return def.open(c, o) }, nil
}

// layoutDescription says which raw layout a --db database is opened with.
func layoutDescription(named string) string {
	if named == "" {
		return "its raw format as recorded; a new database's is chunked at a millisecond"
	}
	return named + " layout, named for a database made before tsdb recorded its raw format"
}

func layoutNames() []string {
	names := make([]string, len(layouts))
	for i, l := range layouts {
		names[i] = l.name
	}
	return names
}

func findLayout(name string) (layoutDef, error) {
	for _, l := range layouts {
		if strings.EqualFold(l.name, name) {
			return l, nil
		}
	}
	return layoutDef{}, fmt.Errorf("unknown --layout %q (want %s)", name, strings.Join(layoutNames(), ", "))
}

// shortDuration prints 4m and 1h rather than 4m0s and 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
