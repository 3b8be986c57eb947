package rules

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

func mustGroup(t *testing.T, doc string) rulefmt.RuleGroup {
	t.Helper()
	g, err := ParseGroup([]byte(doc))
	require.NoError(t, err)
	return g
}

func groupNames(groups []StoredGroup) []string {
	out := []string{}
	for _, g := range groups {
		out = append(out, g.Namespace+"/"+g.Group.Name)
	}
	return out
}

// TestStore sets, reads, lists and deletes groups on Azurite, every request through the
// limit Checker (a table stands for a database's catalog).
func TestStore(t *testing.T) {
	client, _ := azurite.NewTable(t, nil)
	s, err := NewStore(client)
	require.NoError(t, err)
	ctx := context.Background()

	gen, err := s.Generation(ctx)
	require.NoError(t, err)
	require.Zero(t, gen)
	all, err := s.Load(ctx)
	require.NoError(t, err)
	require.Empty(t, all)
	_, err = s.Group(ctx, "ns", "g")
	require.ErrorIs(t, err, ErrGroupNotFound)
	require.ErrorIs(t, s.Delete(ctx, "ns", "g"), ErrGroupNotFound)
	require.ErrorIs(t, s.DeleteNamespace(ctx, "ns"), ErrNamespaceNotFound)

	cpu := mustGroup(t, exampleGroup)
	odd := mustGroup(t, "name: \"odd|name ~ 'quoted' #1?\"\ninterval: 30s\nrules:\n  - alert: Down\n    expr: up == 0\n    for: 1m\n    labels: {severity: page}\n    annotations: {summary: '{{ $labels.instance }} down'}\n")
	big := bigGroup(t, "big", 150<<10)
	require.NoError(t, s.Set(ctx, "team/a", cpu, nil))
	require.NoError(t, s.Set(ctx, "team/a", odd, nil))
	require.NoError(t, s.Set(ctx, "team/b ~ 100%", big, nil))
	require.NoError(t, s.Set(ctx, "team/a|x", cpu, nil)) // a namespace whose keys follow team/a's
	gen, err = s.Generation(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(4), gen)

	got, err := s.Group(ctx, "team/a", odd.Name)
	require.NoError(t, err)
	require.Equal(t, StoredGroup{Namespace: "team/a", Group: odd}, got)
	got, err = s.Group(ctx, "team/b ~ 100%", "big")
	require.NoError(t, err)
	require.Equal(t, big, got.Group)

	all, err = s.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"team/a/cpu", "team/a/" + odd.Name, "team/a|x/cpu", "team/b ~ 100%/big"}, groupNames(all))
	in, err := s.Groups(ctx, "team/a")
	require.NoError(t, err)
	require.Equal(t, []string{"team/a/cpu", "team/a/" + odd.Name}, groupNames(in))
	in, err = s.Groups(ctx, "nope")
	require.NoError(t, err)
	require.Empty(t, in)

	// A replacement: one generation more, no group more.
	cpu2 := mustGroup(t, "name: cpu\ninterval: 2m\nrules:\n  - record: job:cpu:rate1m\n    expr: sum by (job) (rate(cpu_seconds_total[1m]))\n")
	require.NoError(t, s.Set(ctx, "team/a", cpu2, nil))
	got, err = s.Group(ctx, "team/a", "cpu")
	require.NoError(t, err)
	require.Equal(t, cpu2, got.Group)
	all, err = s.Load(ctx)
	require.NoError(t, err)
	require.Len(t, all, 4)

	// Limits: a new group over the groups of the store, a group over its rules; replacing a
	// group at the limit is no new group.
	err = s.Set(ctx, "team/c", cpu, &SetOptions{MaxGroups: 4})
	require.ErrorIs(t, err, ErrLimit)
	require.Contains(t, err.Error(), "ruler_max_rule_groups_per_tenant")
	require.NoError(t, s.Set(ctx, "team/a", cpu, &SetOptions{MaxGroups: 4}))
	err = s.Set(ctx, "team/c", odd, &SetOptions{MaxRulesPerGroup: 0})
	require.NoError(t, err)
	err = s.Set(ctx, "team/c", big, &SetOptions{MaxRulesPerGroup: 5})
	require.ErrorIs(t, err, ErrLimit)
	require.Contains(t, err.Error(), "ruler_max_rules_per_rule_group")

	// A bad group is not stored: no generation more.
	before, err := s.Generation(ctx)
	require.NoError(t, err)
	bad := cpu
	bad.Rules = []rulefmt.Rule{{Record: "x", Expr: "sum("}}
	require.ErrorIs(t, s.Set(ctx, "team/a", bad, nil), ErrBadRules)
	bad = cpu
	bad.Name = ""
	require.ErrorIs(t, s.Set(ctx, "team/a", bad, nil), ErrBadRules)
	after, err := s.Generation(ctx)
	require.NoError(t, err)
	require.Equal(t, before, after)
	got, err = s.Group(ctx, "team/a", "cpu")
	require.NoError(t, err)
	require.Equal(t, cpu, got.Group)

	// Deletes.
	require.NoError(t, s.Delete(ctx, "team/a", odd.Name))
	_, err = s.Group(ctx, "team/a", odd.Name)
	require.ErrorIs(t, err, ErrGroupNotFound)
	require.NoError(t, s.DeleteNamespace(ctx, "team/a"))
	require.ErrorIs(t, s.DeleteNamespace(ctx, "team/a"), ErrNamespaceNotFound)
	all, err = s.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"team/a|x/cpu", "team/b ~ 100%/big", "team/c/" + odd.Name}, groupNames(all))
}

// Changes of several stores (servers) at once are serialized by the generation's ETag:
// none is lost, and a limit holds.
func TestStoreConcurrentChanges(t *testing.T) {
	client, _ := azurite.NewTable(t, nil)
	stores := make([]*Store, 3)
	for i := range stores {
		var err error
		stores[i], err = NewStore(client)
		require.NoError(t, err)
	}
	ctx := context.Background()
	g := mustGroup(t, exampleGroup)
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gi := g
			gi.Name = fmt.Sprintf("g%02d", i)
			errs[i] = stores[i%len(stores)].Set(ctx, "ns", gi, &SetOptions{MaxGroups: 8})
		}()
	}
	wg.Wait()
	stored, refused := 0, 0
	for _, err := range errs {
		if err == nil {
			stored++
		} else {
			require.ErrorIs(t, err, ErrLimit)
			refused++
		}
	}
	require.Equal(t, 8, stored)
	require.Equal(t, 4, refused)
	all, err := stores[0].Load(ctx)
	require.NoError(t, err)
	require.Len(t, all, 8)
	gen, err := stores[1].Generation(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(8), gen)
}

// A namespace of more groups than a transaction holds is deleted in several.
func TestStoreDeleteLargeNamespace(t *testing.T) {
	client, checker := azurite.NewTable(t, nil)
	s, err := NewStore(client)
	require.NoError(t, err)
	ctx := context.Background()
	g := mustGroup(t, exampleGroup)
	for i := range 120 {
		g.Name = fmt.Sprintf("g%03d", i)
		require.NoError(t, s.Set(ctx, "many", g, nil))
	}
	require.NoError(t, s.Set(ctx, "other", g, nil))
	checker.Reset()
	require.NoError(t, s.DeleteNamespace(ctx, "many"))
	require.Equal(t, int64(2), checker.Stats().Batches)
	all, err := s.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"other/g119"}, groupNames(all))
	gen, err := s.Generation(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(123), gen)
}
