package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

var coveredLine = regexp.MustCompile(`^(compact|rollup): covered \[(\S+), (\S+)\) in \S+ \(\d+ requests?, .+ sent, .+ received\)$`)

// maintainRun is what a run of maintain printed: the fold's line, each range covered, the
// rollup of dirty slices' line, the retention's line.
type maintainRun struct {
	fold, flagged, retain string
	from, to              map[string]time.Time
}

func parseMaintain(t *testing.T, out string) maintainRun {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 5, "a line per step: %q", out)
	r := maintainRun{fold: lines[0], flagged: lines[3], retain: lines[4], from: map[string]time.Time{}, to: map[string]time.Time{}}
	for i, task := range []string{"compact", "rollup"} {
		m := coveredLine.FindStringSubmatch(lines[1+i])
		require.NotNil(t, m, "line %q", lines[1+i])
		require.Equal(t, task, m[1], "fold, compact, rollup, flagged, retain: in that order")
		var err error
		r.from[task], err = time.Parse(time.RFC3339Nano, m[2])
		require.NoError(t, err)
		r.to[task], err = time.Parse(time.RFC3339Nano, m[3])
		require.NoError(t, err)
	}
	return r
}

// maintain on a database with nothing to do prints zeros; compaction and rollup cover from
// the catch-up horizon to now (a rollup: an hour ago, when windows seal) and record it; a
// second run starts where the first ended; --from starts earlier; the record never goes back.
func TestMaintain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env, _ := account(t)
	name := "cli" + strings.ToLower(azurite.NewTableName()[1:9])
	dbtest.DropOnCleanup(t, name)
	before := time.Now().UTC()
	out := ok(t, env, "", "maintain", "--db", name, "--catch-up", "48h")
	after := time.Now().UTC()
	first := parseMaintain(t, out)
	assert.Regexp(t, `^fold: 0 entities, 0 points, 0 series \(all staged before \S+\) in \S+ \(\d+ requests?, .+\)$`, first.fold)
	assert.Regexp(t, `^flagged: rolled up the slices of 0 dirty markers in \S+ \(4 requests, .+\)$`, first.flagged,
		"one query (no marker) under the task's lease (read, taken, released)")
	assert.Regexp(t, `^retain: dropped 0 tables in \S+ \(\d+ requests?, .+\)$`, first.retain, "the minute tier has a retention: retain runs")
	t.Logf("maintain of an empty database:\n%s", out)
	end := first.to["compact"]
	require.False(t, end.Before(before.Truncate(time.Millisecond)) || end.After(after), "compaction covers up to now: %v", end)
	assert.Equal(t, end.Add(-48*time.Hour), first.from["compact"], "from the catch-up horizon")
	assert.Equal(t, end.Add(-48*time.Hour), first.from["rollup"])
	assert.Equal(t, end.Add(-tsdb.DefaultSealDelay), first.to["rollup"], "up to the seal delay")

	db, err := tsdb.Open(ctx, newService(t), name, nil)
	require.NoError(t, err)
	covered := func(task string) time.Time {
		t.Helper()
		c, ok, err := db.Tasks().Covered(ctx, task)
		require.NoError(t, err)
		require.True(t, ok, task)
		return c
	}
	assert.Equal(t, first.to["compact"], covered(tsdb.TaskCompact), "recorded")
	assert.Equal(t, first.to["rollup"], covered(tsdb.TaskRollup))

	second := parseMaintain(t, ok(t, env, "", "maintain", "--db", name))
	assert.Equal(t, first.to, second.from, "the second run starts where the first ended")
	assert.Equal(t, second.to["compact"], covered(tsdb.TaskCompact))

	third := parseMaintain(t, ok(t, env, "", "maintain", "--db", name, "--from", "-100h"))
	assert.Equal(t, third.to["compact"].Add(-100*time.Hour), third.from["compact"], "--from, whatever was recorded")
	assert.Equal(t, third.to["compact"].Add(-100*time.Hour), third.from["rollup"])
	assert.Equal(t, third.to["compact"], covered(tsdb.TaskCompact))

	// A --from after the recorded progress skips nothing: the run starts at the progress.
	fourth := parseMaintain(t, ok(t, env, "", "maintain", "--db", name, "--from", "-1ms"))
	assert.Equal(t, third.to["compact"], fourth.from["compact"])
}

// maintain folds what writes staged (a writer whose clock is half an hour behind: its
// arrival bucket is foldable now), then nothing; the points read back from the raw tables.
// While another process folds, it leaves the fold to it and goes on.
func TestMaintainFolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env, _ := account(t)
	name := "cli" + strings.ToLower(azurite.NewTableName()[1:9])
	dbtest.DropOnCleanup(t, name)
	writer, err := tsdb.Open(ctx, newService(t), name, &tsdb.Options{
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) },
		Now:    func() time.Time { return time.Now().Add(-30 * time.Minute) }})
	require.NoError(t, err)
	at := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Second)
	var batch []tsdb.SeriesPoints
	for s := range 20 {
		sp := tsdb.SeriesPoints{Series: fmt.Sprintf("s%02d", s)}
		for i := range 3 {
			sp.Points = append(sp.Points, tablets.Point{Time: at.Add(time.Duration(i) * time.Minute), Value: float64(s*10 + i)})
		}
		batch = append(batch, sp)
	}
	require.NoError(t, writer.WriteMany(ctx, batch))

	// Another process holds the fold lease (docs/format.md, "The catalog"): this fold leaves
	// the staged points to it, and the run goes on.
	catalog := newService(t).NewClient(name + "m")
	lease := entity.AppendEnd(entity.AppendStringProperty(entity.AppendDouble(entity.AppendKeys(nil, "fold", "lease"),
		"U", float64(time.Now().Add(5*time.Minute).UnixMilli())), "H", "another"))
	_, err = catalog.AddEntity(ctx, lease, nil)
	require.NoError(t, err)
	busy := ok(t, env, "", "maintain", "--db", name)
	assert.Regexp(t, `^fold: another process is folding: left to it, in \S+ \(.+\)\n`, busy)
	assert.Len(t, parseMaintain(t, busy).to, 2, "then compaction and rollup")

	// A server's scheduler keeps the compaction's lease between its ticks: this compaction
	// leaves it to that process, and the run goes on (the fold still another's too).
	compactLease := entity.AppendEnd(entity.AppendStringProperty(entity.AppendDouble(entity.AppendKeys(nil, "compact", "lease"),
		"U", float64(time.Now().Add(5*time.Minute).UnixMilli())), "H", "a server"))
	_, err = catalog.AddEntity(ctx, compactLease, nil)
	require.NoError(t, err)
	kept := ok(t, env, "", "maintain", "--db", name, "--catch-up", "1h")
	assert.Regexp(t, `(?m)^compact: another process is running it, or keeps it for its next run \(a server's scheduler\): left to it, in \S+ \(.+\)$`, kept)
	assert.Regexp(t, `(?m)^rollup: `, kept, "then the rollup")
	_, err = catalog.DeleteEntity(ctx, "compact", "lease", nil)
	require.NoError(t, err)

	_, err = catalog.DeleteEntity(ctx, "fold", "lease", nil)
	require.NoError(t, err)

	out := ok(t, env, "", "maintain", "--db", name)
	t.Logf("maintain after a staged write:\n%s", out)
	r := parseMaintain(t, out)
	assert.Regexp(t, `^fold: [1-9]\d* entit(y|ies), 60 points, 20 series \(all staged before \S+\) in \S+ \(\d+ requests?, .+\)$`, r.fold)
	r = parseMaintain(t, ok(t, env, "", "maintain", "--db", name))
	assert.Regexp(t, `^fold: 0 entities, 0 points, 0 series \(all staged before \S+\) in `, r.fold, "nothing left")

	got := ok(t, env, "", "query", "--db", name, "--series", "s07", "--from", at.Format(time.RFC3339), "--to", "now", "--format", "csv")
	assert.Equal(t, fmt.Sprintf("time,value\n%s,70\n%s,71\n%s,72\n", at.Format(time.RFC3339), at.Add(time.Minute).Format(time.RFC3339), at.Add(2*time.Minute).Format(time.RFC3339)), got)
}

// A step that fails ends the run with status 1, after the steps before it: here the
// compaction's record is of a newer format version, which this version must not overwrite.
func TestMaintainFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env, _ := account(t)
	name := "cli" + strings.ToLower(azurite.NewTableName()[1:9])
	dbtest.DropOnCleanup(t, name)
	_, err := tsdb.Open(ctx, newService(t), name, nil)
	require.NoError(t, err)
	newer := entity.AppendEnd(entity.AppendDouble(entity.AppendKeys(nil, "progress", "compact"), "V", 2))
	_, err = newService(t).NewClient(name+"m").AddEntity(ctx, newer, nil)
	require.NoError(t, err)

	r := cli(t, env, "", "maintain", "--db", name)
	assert.Equal(t, exitError, r.code)
	assert.Regexp(t, `^fold: 0 entities, 0 points, 0 series \(all staged before \S+\) in \S+ \(.+\)\n$`, r.stdout, "the fold, then nothing")
	assert.Contains(t, r.line(t), "compact: ")
	assert.Contains(t, r.line(t), "format version 2")

	help := ok(t, nil, "", "maintain", "--help")
	assert.Contains(t, help, "tablets maintain --db NAME")
	assert.Regexp(t, `--catch-up duration +.*\(default 72h0m0s\)`, help)
	assert.Regexp(t, `--layout string +[^\n]*\n[^\n]*\n[^\n]*\(default: the database's own\)`, help)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"maintain"}, "--db is required"},
		{[]string{"maintain", "--db", name, "--table", "abc"}, "--table"},
		{[]string{"maintain", "--db", name, "--catch-up", "0s"}, "--catch-up must be positive"},
		{[]string{"maintain", "--db", name, "--from", "+2h"}, "in the future"},
		{[]string{"maintain", "--db", name, "--from", "yesterday"}, "--from"},
		{[]string{"maintain", "--db", "1bad"}, "letters and digits"},
	} {
		r := cli(t, env, "", tc.args...)
		assert.Equal(t, exitUsage, r.code, tc.args)
		assert.Contains(t, r.line(t), tc.want, tc.args)
		assert.Empty(t, r.stdout, tc.args)
	}
}

func newService(t *testing.T) *aztables.ServiceClient {
	t.Helper()
	svc, err := azurite.Shared(t).NewServiceClient(nil)
	require.NoError(t, err)
	return svc
}
