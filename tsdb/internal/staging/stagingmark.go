package staging

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
)

// The staging mark is an entity of the staging table, beside the staging log (LogPartition,
// StagingMarkKey), that every change a listing would find rewrites after it is made: a
// staged write (its transactions), a record in the staging log or the folds' log, a change
// recorded in the catalog's logs (MarkLogs). It sorts before every other entity of the
// table, so that a listing reads it first. A refresh that finds it, by a point read, as the
// last listing found it knows that nothing that listing would have found otherwise was
// made since that listing began: it takes the listing as it stands, without the query of
// the table (docs/format.md, "The staging mark"). A point read is the cheapest request
// there is, and on Azure one round trip whatever the table holds; the query of the
// entities written since reads every partition of the table (on Azurite, every entity).
const StagingMarkKey = "m"

// stagingMarkBody is the staging mark's entity with the value r.
func stagingMarkBody(r [16]byte) []byte {
	b := entity.AppendKeys(nil, LogPartition, StagingMarkKey)
	b = entity.AppendDouble(b, "V", 1)
	b = entity.AppendStringProperty(b, logsMarkProp, hex.EncodeToString(r[:]))
	return entity.AppendEnd(b)
}

// markWrites joins the staging mark's writes of changes made at once: a change made while a
// write is under way waits for the next, which starts after the one under way ends and
// serves every change made before it starts. One write is made in a turn, however many
// commits a process makes at once.
type markWrites struct {
	mu      sync.Mutex
	running bool        // a write is under way
	next    *markFlight // the write that starts after it (nil: none waits)
	write   func(context.Context) error
}

// markFlight is one write of the mark, and the changes it serves wait for it.
type markFlight struct {
	ctx  context.Context // the first joiner's, without its cancel
	done chan struct{}
	err  error
}

// mark returns once a write of the mark that began after the call began ended: its error,
// or ctx's should ctx end first.
func (m *markWrites) mark(ctx context.Context) error {
	m.mu.Lock()
	f := m.next
	if f == nil {
		f = &markFlight{ctx: context.WithoutCancel(ctx), done: make(chan struct{})}
		m.next = f
	}
	if !m.running {
		m.running, m.next = true, nil
		go m.run(f)
	}
	m.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run writes f, then each write that was joined while one was under way.
func (m *markWrites) run(f *markFlight) {
	for f != nil {
		ctx, cancel := context.WithTimeout(f.ctx, prefetchTimeout)
		f.err = m.write(ctx)
		cancel()
		close(f.done)
		m.mu.Lock()
		f, m.next = m.next, nil
		m.running = f != nil
		m.mu.Unlock()
	}
}

// markStaged rewrites the staging mark after a change (joined with the changes made at
// once: markWrites). A Table that does not stage has no listing to tell: nothing.
func (st *Table) markStaged(ctx context.Context) error {
	if !st.reads {
		return nil
	}
	if err := st.marks.mark(ctx); err != nil {
		return fmt.Errorf("tsdb: the staging mark: %w", err)
	}
	return nil
}

// writeStagingMark writes the staging mark with a new random value. A table gone gets none:
// a listing that finds no table vouches for nothing.
func (st *Table) writeStagingMark(ctx context.Context) error {
	var r [16]byte
	_, _ = rand.Read(r[:]) // never fails (crypto/rand)
	_, err := st.client.UpsertEntity(ctx, stagingMarkBody(r), &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace})
	if azerr.IsTableGone(err) {
		return nil
	}
	return err
}

// readStagingMark reads the staging mark (its ETag and value, as a listing finds it), or ""
// when there is none (or no table).
func (st *Table) readStagingMark(ctx context.Context) (string, error) {
	resp, err := st.client.GetEntity(ctx, LogPartition, StagingMarkKey, nil)
	if azerr.IsTableGone(err) { // a 404 of the entity, or of the table
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var e entity.Entity
	e.AllowStrings = true
	if err := e.Decode(resp.Value); err != nil {
		return "", fmt.Errorf("the staging mark: %w", err)
	}
	v, _ := e.String(logsMarkProp)
	etag := string(e.ETag) // as a listing reads it, from the body
	if etag == "" {
		etag = string(resp.ETag)
	}
	return markOf(etag, string(v)), nil
}

// markOf is a mark as a listing and a refresh compare it: its ETag and its value (Azurite
// may give two writes of one millisecond one ETag).
func markOf(etag, value string) string { return etag + "|" + value }
