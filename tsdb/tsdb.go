package tsdb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/filter"
)

// ErrExpired is wrapped by the error of a Write holding a point older than the raw
// retention, or in a period whose table was dropped. Such a Write sends nothing.
var ErrExpired = errors.New("tsdb: point expired")

// Options configure a DB. The zero value of each field means its default.
type Options struct {
	// Layout makes the raw store of one table. Default: advanced with its defaults.
	Layout func(*aztables.Client) (tablets.Store, error)
	// RawPeriod is the span of one raw table: a whole number of seconds, epoch-aligned.
	// Default 7 days.
	RawPeriod time.Duration
	// RawRetention: Retain drops the raw tables whose whole span is older; and a Write of an
	// older point is ErrExpired. 0: keep forever.
	RawRetention time.Duration
	// Tiers are the rollup tiers, finest first. nil: DefaultTiers; an empty slice: none.
	Tiers []Tier
	// Accuracy is the relative accuracy of quantiles: 0 for 0.01, else in [1e-6, 1).
	Accuracy float64
	// SealDelay is how long after its end a tier window is sealed: Aggregate trusts a window
	// rolled up at least that long after its end, unless a Write flagged it since (a Write
	// flags the windows of points older than SealDelay, less 5 minutes of clock skew, and
	// only those: newer writes cost nothing more). 0: DefaultSealDelay (an hour); at least
	// 10 minutes.
	SealDelay time.Duration
}

// DefaultRawPeriod is the default span of a raw table.
const DefaultRawPeriod = 7 * 24 * time.Hour

// maxNameLength leaves room in Azure's 63 characters for what table names add to the name.
const maxNameLength = 40

// DB is a time-series database over many tables named from one base name. It is safe for
// concurrent use, and keeps no state another process cannot see (its caches only remember
// what cannot change: tables that exist, periods dropped).
type DB struct {
	service *aztables.ServiceClient
	name    string
	opts    Options
	meta    *aztables.Client

	mu         sync.Mutex
	stores     map[uint64]tablets.Store // raw store by period start (seconds)
	created    map[uint64]bool          // raw and index tables known to exist
	dropped    map[uint64]bool          // raw periods known to be dropped
	registered map[indexKey]bool        // series known to be in a period's index
	labels     map[string]Labels        // label sets known to be registered, by key
	tables     map[string]bool          // tier tables known to exist
}

type indexKey struct {
	period uint64
	series string
}

var _ tablets.Store = (*DB)(nil)

// Open returns the database named name on service, creating its catalog table if needed.
// name is letters and digits, starting with a letter, at most 40 characters. nil options mean
// the defaults; invalid ones give an error wrapping tablets.ErrInvalidOptions, before any
// request.
func Open(ctx context.Context, service *aztables.ServiceClient, name string, opts *Options) (*DB, error) {
	if service == nil {
		return nil, fmt.Errorf("tsdb: %w: nil service client", tablets.ErrInvalidOptions)
	}
	o, err := withDefaults(name, opts)
	if err != nil {
		return nil, err
	}
	db := &DB{service: service, name: name, opts: o, meta: service.NewClient(name + "m"),
		stores: map[uint64]tablets.Store{}, created: map[uint64]bool{}, dropped: map[uint64]bool{}, registered: map[indexKey]bool{}, labels: map[string]Labels{}, tables: map[string]bool{}}
	if _, err := o.Layout(service.NewClient(db.rawTable(0))); err != nil {
		return nil, fmt.Errorf("tsdb: %w", err)
	}
	if err := tablets.EnsureTable(ctx, db.meta); err != nil {
		return nil, fmt.Errorf("tsdb: catalog: %w", err)
	}
	return db, nil
}

// CheckOptions reports, without any request, the error Open would give for a bad name or
// options (wrapping tablets.ErrInvalidOptions), or nil.
func CheckOptions(name string, opts *Options) error {
	o, err := withDefaults(name, opts)
	if err != nil {
		return err
	}
	offline, err := aztables.NewClientWithNoCredential("https://account.invalid/"+name+"r0", nil)
	if err != nil {
		return err
	}
	if _, err := o.Layout(offline); err != nil {
		return fmt.Errorf("tsdb: %w", err)
	}
	return nil
}

// withDefaults checks the name and the options and fills in the defaults.
func withDefaults(name string, opts *Options) (Options, error) {
	invalid := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("tsdb: %w: "+format, append([]any{tablets.ErrInvalidOptions}, args...)...)
	}
	if err := validName(name); err != nil {
		return invalid("%v", err)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Layout == nil {
		o.Layout = func(c *aztables.Client) (tablets.Store, error) { return advanced.New(c, nil) }
	}
	if o.RawPeriod == 0 {
		o.RawPeriod = DefaultRawPeriod
	}
	switch {
	case o.RawPeriod < time.Second || o.RawPeriod%time.Second != 0:
		return invalid("RawPeriod %v is not a whole number of seconds", o.RawPeriod)
	case o.RawRetention < 0:
		return invalid("RawRetention %v is negative", o.RawRetention)
	}
	if o.Tiers == nil {
		o.Tiers = DefaultTiers
	}
	tiers, err := checkTiers(o.Tiers)
	if err != nil {
		return invalid("%v", err)
	}
	o.Tiers = tiers
	if err := checkAccuracy(o.Accuracy); err != nil {
		return invalid("%v", err)
	}
	if o.Accuracy == 0 {
		o.Accuracy = defaultAccuracy
	}
	if o.SealDelay == 0 {
		o.SealDelay = DefaultSealDelay
	}
	if o.SealDelay < 2*sealMargin {
		return invalid("SealDelay %v is under %v", o.SealDelay, 2*sealMargin)
	}
	return o, nil
}

func validName(name string) error {
	if len(name) < 3 || len(name) > maxNameLength {
		return fmt.Errorf("name %q must be 3 to %d characters", name, maxNameLength)
	}
	for i, c := range name {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return fmt.Errorf("name %q must be letters and digits, starting with a letter", name)
		}
	}
	return nil
}

// Name returns the database's base name.
func (db *DB) Name() string { return db.name }

// Options returns the database's options with defaults filled in.
func (db *DB) Options() Options { return db.opts }

// period is the start, in Unix seconds, of the raw period holding t.
func (db *DB) period(t time.Time) uint64 {
	p := uint64(db.opts.RawPeriod / time.Second)
	return uint64(t.Unix()) / p * p
}

func (db *DB) periodStart(p uint64) time.Time { return time.Unix(int64(p), 0).UTC() }
func (db *DB) periodEnd(p uint64) time.Time   { return db.periodStart(p).Add(db.opts.RawPeriod) }

// rawTable is the name of the raw table of the period starting at p (Unix seconds):
// name + "r" + p in decimal. The catalog is name + "m".
func (db *DB) rawTable(p uint64) string { return db.name + "r" + strconv.FormatUint(p, 10) }

// indexTable is the name of the series index of the period starting at p: name + "i" + p.
func (db *DB) indexTable(p uint64) string { return db.name + "i" + strconv.FormatUint(p, 10) }

// store returns the raw store of period p.
func (db *DB) store(p uint64) (tablets.Store, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if s, ok := db.stores[p]; ok {
		return s, nil
	}
	s, err := db.opts.Layout(db.service.NewClient(db.rawTable(p)))
	if err != nil {
		return nil, fmt.Errorf("tsdb: %w", err)
	}
	db.stores[p] = s
	return s, nil
}

// rawPeriods lists the periods whose raw tables exist, ascending: one request (a page per
// 1,000 tables).
func (db *DB) rawPeriods(ctx context.Context) ([]uint64, error) {
	return db.periods(ctx, "r", db.rawTable)
}

// indexPeriods lists the periods whose series indexes exist, ascending: one request.
func (db *DB) indexPeriods(ctx context.Context) ([]uint64, error) {
	return db.periods(ctx, "i", db.indexTable)
}

// periods lists the periods of the tables named name + kind + start.
func (db *DB) periods(ctx context.Context, kind string, table func(uint64) string) ([]uint64, error) {
	prefix := db.name + kind
	f := filter.And(filter.Ge("TableName", prefix), filter.Lt("TableName", db.name+string(kind[0]+1))).String()
	var periods []uint64
	for pager := db.service.NewListTablesPager(&aztables.ListTablesOptions{Filter: &f}); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("tsdb: list tables: %w", err)
		}
		for _, t := range page.Tables {
			if t.Name == nil || !strings.HasPrefix(*t.Name, prefix) {
				continue
			}
			if p, err := strconv.ParseUint((*t.Name)[len(prefix):], 10, 64); err == nil && table(p) == *t.Name {
				periods = append(periods, p)
			}
		}
	}
	slices.Sort(periods)
	return periods, nil
}

func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

// isTableGone reports an error of a table that does not exist (dropped meanwhile).
func isTableGone(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && (re.ErrorCode == string(aztables.TableNotFound) || re.StatusCode == http.StatusNotFound)
}
