package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/server/limits"
	"github.com/seed71701133/tablets/tsdb"
)

// maxMissing bounds the tenants remembered as missing.
const maxMissing = 4096

// handler is the handler of tenant id: its server, opened (and its database created) on a
// write if need be; for a read of a tenant with no database, the empty handler.
func (t *Tenants) handler(ctx context.Context, id string, write bool) (http.Handler, error) {
	if s := t.opened(id); s != nil {
		return s, nil
	}
	if write {
		return t.open(ctx, id)
	}
	if t.isMissing(id) {
		return t.empty, nil
	}
	ok, err := tsdb.Exists(ctx, t.service, tenantDatabase(t.base, id))
	if err != nil {
		return nil, err
	}
	if !ok {
		t.markMissing(id)
		return t.empty, nil
	}
	return t.open(ctx, id)
}

// opened is tenant id's server if this process opened it, else nil.
func (t *Tenants) opened(id string) *Server {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.tenants[id]; e != nil {
		return e.srv
	}
	return nil
}

// open opens tenant id's database, creating it if need be, and its server, once; if Run
// runs, it starts the server's background work.
func (t *Tenants) open(ctx context.Context, id string) (*Server, error) {
	t.mu.Lock()
	e := t.tenants[id]
	if e == nil {
		e = &tenant{id: id}
		t.tenants[id] = e
	}
	t.mu.Unlock()

	e.open.Lock()
	defer e.open.Unlock()
	if s := t.opened(id); s != nil {
		return s, nil
	}
	db, err := tsdb.Open(ctx, t.service, t.databaseOf(id), spreadDB(t.opts.DB, t.spreadOfTenant(id)))
	if err != nil {
		return nil, err
	}
	// Once made, a server stays: its metrics are registered for good.
	s, err := New(db, t.serverOptions(id))
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	e.srv = s
	delete(t.missing, id)
	t.startLocked(e)
	t.mu.Unlock()
	return s, nil
}

func (t *Tenants) isMissing(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	until, ok := t.missing[id]
	return ok && t.now().Before(until)
}

func (t *Tenants) markMissing(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if len(t.missing) >= maxMissing {
		for k, until := range t.missing {
			if !now.Before(until) {
				delete(t.missing, k)
			}
		}
		if len(t.missing) >= maxMissing {
			clear(t.missing)
		}
	}
	t.missing[id] = now.Add(t.opts.MissingFor)
}

// Run runs the background work (fold, rollup, compaction, retention: [Server.Run]) of every
// allowed tenant until ctx is done: of the default tenant, of those this process opens, and
// of every tenant database in the account, listed at start and every ListEvery (those
// another server created, and those no request asked for since this one started). A tenant
// no longer allowed stops. It returns nil once every tenant's work stopped.
func (t *Tenants) Run(ctx context.Context) error {
	t.mu.Lock()
	if t.runCtx != nil {
		t.mu.Unlock()
		return fmt.Errorf("server: Tenants.Run is already running")
	}
	t.runCtx = ctx
	t.mu.Unlock()
	if t.opts.BackgroundServers > 0 && t.backgroundOn() {
		// The loops start once the lease was tried: their first ticks (at start) are then
		// this server's if it took a slot, not skipped for a lease about to be taken. (A
		// tenant opened meanwhile starts its own at once.)
		tried := make(chan struct{})
		t.runs.Go(func() { t.holdBackground(ctx, sync.OnceFunc(func() { close(tried) })) })
		select {
		case <-tried:
		case <-ctx.Done():
		}
	}
	t.mu.Lock()
	for _, e := range t.tenants {
		t.startLocked(e)
	}
	t.mu.Unlock()
	t.started.Store(true)

	tick := time.NewTicker(t.opts.ListEvery)
	defer tick.Stop()
	for {
		if err := t.Sync(ctx); err != nil && ctx.Err() == nil {
			t.log.Warn("listing the tenant databases", "err", err)
		}
		select {
		case <-ctx.Done():
			t.mu.Lock()
			t.runCtx = nil
			for _, e := range t.tenants {
				t.stopLocked(e)
			}
			t.mu.Unlock()
			t.runs.Wait()
			return nil
		case <-tick.C:
		}
	}
}

// Sync lists the tenant databases of the account and opens those of allowed tenants that
// this process has not opened (starting their background work if Run runs); it stops the
// work of tenants no longer allowed. Run calls it at start and every ListEvery.
func (t *Tenants) Sync(ctx context.Context) error {
	var names []string
	if len(t.base) < maxDatabaseName { // else no tenant fits
		var err error
		if names, err = tsdb.Databases(ctx, t.service, t.base+"x"); err != nil {
			return err
		}
	}
	cfg := t.config()
	var errs []error
	for _, name := range names {
		id := name[len(t.base)+1:]
		if checkTenantName(t.base, id) != nil || !cfg.Allowed(id) || t.opened(id) != nil {
			continue
		}
		if _, err := t.open(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("tenant %s: %w", id, err))
		}
	}
	t.mu.Lock()
	for id, e := range t.tenants {
		if cfg.Allowed(id) {
			t.startLocked(e)
		} else {
			t.stopLocked(e)
		}
	}
	t.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("server: %w", errors.Join(errs...))
	}
	return nil
}

// startLocked starts e's background work if Run runs and it does not already. Called with
// t.mu held.
func (t *Tenants) startLocked(e *tenant) {
	if t.runCtx == nil || e.srv == nil || e.stop != nil || !t.config().Allowed(e.id) {
		return
	}
	ctx, cancel := context.WithCancel(t.runCtx)
	e.stop = cancel
	t.runs.Add(1)
	go func(s *Server) {
		defer t.runs.Done()
		_ = s.Run(ctx)
	}(e.srv)
}

// stopLocked stops e's background work, if it runs, without waiting for it. Called with
// t.mu held.
func (t *Tenants) stopLocked(e *tenant) {
	if e.stop != nil {
		e.stop()
		e.stop = nil
	}
}

// Running returns, sorted, the tenants whose background work runs.
func (t *Tenants) Running() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for id, e := range t.tenants {
		if e.stop != nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// foldsKeptBytes is the bytes the opened tenants' databases keep of their last folds
// (tsdb.DB.FoldsKept).
func (t *Tenants) foldsKeptBytes() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for _, e := range t.tenants {
		if e.srv != nil {
			_, b := e.srv.DB().FoldsKept()
			n += b
		}
	}
	return n
}

// Opened returns, sorted, the tenants whose server this process opened, the default one
// included.
func (t *Tenants) Opened() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for id, e := range t.tenants {
		if e.srv != nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Tenant is the server of tenant id if this process opened it, else nil.
func (t *Tenants) Tenant(id string) *Server {
	if id == "" {
		id = limits.DefaultTenant
	}
	return t.opened(id)
}

// Open returns the server of tenant id, opening it (and creating its database) if this
// process has not: what a first write does. The tenant must be allowed by the configuration
// in force. tablets serve opens the tenant of its rule files at start, so that they are
// evaluated before any request comes for it.
func (t *Tenants) Open(ctx context.Context, id string) (*Server, error) {
	if id == "" || id == limits.DefaultTenant {
		return t.def, nil
	}
	if err := checkTenantName(t.base, id); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if !t.config().Allowed(id) {
		return nil, fmt.Errorf("server: tenant %q is not allowed by the configuration", id)
	}
	return t.open(ctx, id)
}

// ReloadRules reads the rule files of every tenant server this process opened with rules
// again (rules.Manager.Reload): a tenant whose files do not load keeps its rules, and the
// error, joining those of every such tenant, names them.
func (t *Tenants) ReloadRules() error {
	var errs []error
	for _, id := range t.Opened() {
		if s := t.opened(id); s != nil && s.Rules() != nil {
			if err := s.Rules().Reload(); err != nil {
				errs = append(errs, fmt.Errorf("tenant %s: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// backgroundOn reports whether the servers' options run any background loop (a backfill's
// server runs none, and takes no slot of the background lease).
func (t *Tenants) backgroundOn() bool {
	o := t.srvOpts
	return o.FoldEvery >= 0 || o.RollupEvery >= 0 || o.CompactEvery >= 0 || o.RetainEvery >= 0
}

// holdBackground takes a slot of the background lease (TenantsOptions.BackgroundServers)
// in the base database's catalog and holds it until ctx ends, giving it back then; while
// every slot is another's, or after one is lost, it tries again every BackgroundRetry. It
// calls tried once the first try is over (a slot taken, or none). Its requests are
// ingest's: they never wait behind the background work they let run.
func (t *Tenants) holdBackground(ctx context.Context, tried func()) {
	defer tried()
	ctx = reqlimit.Ingest(ctx)
	tasks := t.def.db.Tasks()
	for {
		for slot := range t.opts.BackgroundServers {
			err := tasks.Exclusive(ctx, tsdb.BackgroundTask(slot), func(ctx context.Context) error {
				t.holding.Store(true)
				tried()
				t.log.Info("holding a slot of the background lease: this server runs the background work", "slot", slot)
				<-ctx.Done()
				t.holding.Store(false)
				return nil
			}, nil)
			if errors.Is(err, tsdb.ErrTaskBusy) {
				continue
			}
			if err != nil && ctx.Err() == nil {
				t.log.Warn("the background lease: this server runs no background work until it takes a slot", "slot", slot, "err", err)
			}
			break
		}
		tried()
		select {
		case <-ctx.Done():
			return
		case <-time.After(t.opts.BackgroundRetry):
		}
	}
}
