package rules

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/pager"
)

// Errors of a Store, each wrapped once.
var (
	// ErrGroupNotFound: no group of that name in that namespace.
	ErrGroupNotFound = errors.New("rules: rule group not found")
	// ErrNamespaceNotFound: no group in that namespace.
	ErrNamespaceNotFound = errors.New("rules: namespace not found")
	// ErrLimit: the change would pass a ruler limit (groups of a tenant, rules of a group);
	// the error is a *LimitError naming it.
	ErrLimit = errors.New("rules: over a ruler limit")
)

// LimitError is a change a limit refused: Limit is the limit's name in the configuration
// file (ruler_max_rule_groups_per_tenant, ruler_max_rules_per_rule_group). It wraps ErrLimit.
type LimitError struct {
	Limit string
	msg   string
}

func (e *LimitError) Error() string { return ErrLimit.Error() + ": " + e.msg }
func (e *LimitError) Unwrap() error { return ErrLimit }

// maxAttempts bounds the attempts of a change that finds another one made meanwhile.
const maxAttempts = 20

// groupPageBytes bounds the memory of a page of groups (an entity may hold up to 1 MiB).
const groupPageBytes = 16 << 20

// Store is the rule groups of one database, kept in its catalog table, in the partition
// GroupsPartition (docs/format.md, "Rule groups"): an entity a group, and the generation
// entity, one more at every change. Every change writes its groups and the generation in one
// transaction, conditional on the generation's ETag: changes of any number of servers are
// serialized, none is lost, and a reader that finds the generation unchanged knows that
// nothing changed. Reads always ask the account. Safe for concurrent use.
type Store struct {
	client *aztables.Client
}

// NewStore returns the store in client's table (the catalog table of a database:
// tsdb.DB.CatalogClient). A nil client is an error wrapping tablets.ErrInvalidOptions.
func NewStore(client *aztables.Client) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("rules: %w: nil table client", tablets.ErrInvalidOptions)
	}
	return &Store{client: client}, nil
}

// SetOptions are the limits a Set checks. Zero values mean no limit.
type SetOptions struct {
	// MaxGroups bounds the groups of the store (a tenant's), the one set included.
	MaxGroups int
	// MaxRulesPerGroup bounds the rules of the group set.
	MaxRulesPerGroup int
}

// Generation reads the generation: the number of changes made (0 before the first). One
// point read.
func (s *Store) Generation(ctx context.Context) (uint64, error) {
	gen, _, _, err := s.readGeneration(ctx)
	return gen, err
}

// readGeneration reads the generation entity; ok false: there is none (generation 0).
func (s *Store) readGeneration(ctx context.Context) (gen uint64, etag azcore.ETag, ok bool, err error) {
	resp, err := s.client.GetEntity(ctx, GroupsPartition, GenerationKey, nil)
	if isNotFound(err) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("rules: reading the generation of the rule groups: %w", err)
	}
	if gen, err = decodeGenerationEntity(resp.Value); err != nil {
		return 0, "", false, err
	}
	return gen, resp.ETag, true, nil
}

func isNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// Load reads every group stored, sorted by namespace and name. An entity that does not
// decode is left out, and the error (wrapping ErrStoredFormat) says which, beside the groups
// that do: a reader evaluates what it can read.
func (s *Store) Load(ctx context.Context) ([]StoredGroup, error) {
	return s.list(ctx, filter.Eq("PartitionKey", GroupsPartition))
}

// Groups returns the groups of namespace ("": of every namespace), sorted by namespace and
// name. An entity that does not decode is an error wrapping ErrStoredFormat.
func (s *Store) Groups(ctx context.Context, namespace string) ([]StoredGroup, error) {
	f := filter.Eq("PartitionKey", GroupsPartition)
	if namespace != "" {
		if err := checkName("namespace", namespace); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadRules, err)
		}
		f = filter.And(f, filter.Ge("RowKey", namespacePrefix(namespace)), filter.Lt("RowKey", namespaceEnd(namespace)))
	}
	groups, err := s.list(ctx, f)
	if err != nil {
		return nil, err
	}
	return groups, nil
}

// list reads the groups f selects (the generation entity, if it does, is skipped).
func (s *Store) list(ctx context.Context, f filter.Expr) ([]StoredGroup, error) {
	var groups []StoredGroup
	var bad []error
	q := pager.SubQuery{Filter: f.String(), Top: 32, PageBytes: groupPageBytes}
	for page, err := range pager.Each(ctx, s.client, q, 0) {
		if err != nil {
			if isNotFound(err) { // no catalog table: no group
				return nil, nil
			}
			return nil, fmt.Errorf("rules: listing the rule groups: %w", err)
		}
		for _, raw := range page.Entities {
			if isGenerationEntity(raw) {
				continue
			}
			g, err := decodeGroupEntity(raw)
			if err != nil {
				bad = append(bad, err)
				continue
			}
			groups = append(groups, g)
		}
	}
	sortGroups(groups)
	return groups, errors.Join(bad...)
}

// isGenerationEntity reports the generation entity among a listing's entities, by its
// RowKey: no group's key is "generation".
func isGenerationEntity(raw []byte) bool {
	k, err := rowKey(raw)
	return err == nil && k == GenerationKey
}

// rowKey is the RowKey of an entity of a listing.
func rowKey(raw []byte) (string, error) {
	e := entity.Entity{AllowStrings: true, AllowNull: true}
	if err := e.Decode(raw); err != nil {
		return "", err
	}
	return string(e.RowKey), nil
}

func sortGroups(groups []StoredGroup) {
	slices.SortFunc(groups, func(a, b StoredGroup) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Group.Name, b.Group.Name)
	})
}

// Group returns group name of namespace, or an error wrapping ErrGroupNotFound.
func (s *Store) Group(ctx context.Context, namespace, name string) (StoredGroup, error) {
	key, err := GroupKey(namespace, name)
	if err != nil {
		return StoredGroup{}, err
	}
	resp, err := s.client.GetEntity(ctx, GroupsPartition, key, nil)
	if isNotFound(err) {
		return StoredGroup{}, fmt.Errorf("%w: group %q of namespace %q", ErrGroupNotFound, name, namespace)
	}
	if err != nil {
		return StoredGroup{}, fmt.Errorf("rules: reading rule group %q of namespace %q: %w", name, namespace, err)
	}
	return decodeGroupEntity(resp.Value)
}

// keys lists the RowKeys f selects, of groups only.
func (s *Store) keys(ctx context.Context, f filter.Expr) ([]string, error) {
	var keys []string
	q := pager.SubQuery{Filter: f.String(), Select: "RowKey"}
	for page, err := range pager.Each(ctx, s.client, q, 0) {
		if err != nil {
			if isNotFound(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("rules: listing the rule groups: %w", err)
		}
		for _, raw := range page.Entities {
			if isGenerationEntity(raw) {
				continue
			}
			k, err := rowKey(raw)
			if err != nil {
				return nil, fmt.Errorf("%w: a key: %v", ErrStoredFormat, err)
			}
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// generationAction is the transaction's operation on the generation: its replacement by
// gen+1 conditional on etag, or its insertion when there was none.
func generationAction(gen uint64, etag azcore.ETag, exists bool) aztables.TransactionAction {
	body := appendGenerationEntity(nil, gen+1)
	if exists {
		return aztables.TransactionAction{ActionType: aztables.TransactionTypeUpdateReplace, Entity: body, IfMatch: &etag}
	}
	return aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: body}
}

// Set stores group g in namespace, replacing the group of its name there if there is one:
// one transaction writing the group and the generation. g is checked as ParseGroup checks a
// group (an error wrapping ErrBadRules), and against opts' limits (ErrLimit); a group whose
// YAML is over MaxStoredGroupBytes wraps ErrBadRules.
func (s *Store) Set(ctx context.Context, namespace string, g rulefmt.RuleGroup, opts *SetOptions) error {
	o := SetOptions{}
	if opts != nil {
		o = *opts
	}
	if o.MaxGroups < 0 || o.MaxRulesPerGroup < 0 {
		return fmt.Errorf("rules: %w: negative limits", tablets.ErrInvalidOptions)
	}
	key, err := GroupKey(namespace, g.Name)
	if err != nil {
		return err
	}
	doc, err := MarshalGroup(g)
	if err != nil {
		return fmt.Errorf("%w: group %q: %v", ErrBadRules, g.Name, err)
	}
	if _, err := ParseGroup(doc); err != nil { // what is stored must read back
		return err
	}
	if len(doc) > MaxStoredGroupBytes {
		return fmt.Errorf("%w: group %q: its YAML is %d bytes, over the %d a stored group may have", ErrBadRules, g.Name, len(doc), MaxStoredGroupBytes)
	}
	if o.MaxRulesPerGroup > 0 && len(g.Rules) > o.MaxRulesPerGroup {
		return &LimitError{Limit: "ruler_max_rules_per_rule_group", msg: fmt.Sprintf(
			"group %q has %d rules, over the %d a group may have (ruler_max_rules_per_rule_group)", g.Name, len(g.Rules), o.MaxRulesPerGroup)}
	}
	body := appendGroupEntity(nil, key, doc)
	for range maxAttempts {
		gen, etag, exists, err := s.readGeneration(ctx)
		if err != nil {
			return err
		}
		if o.MaxGroups > 0 {
			keys, err := s.keys(ctx, filter.Eq("PartitionKey", GroupsPartition))
			if err != nil {
				return err
			}
			if !slices.Contains(keys, key) && len(keys)+1 > o.MaxGroups {
				return &LimitError{Limit: "ruler_max_rule_groups_per_tenant", msg: fmt.Sprintf(
					"the tenant has %d rule groups, the most it may have (ruler_max_rule_groups_per_tenant)", len(keys))}
			}
		}
		err = batch.Submit(ctx, s.client, GroupsPartition, []aztables.TransactionAction{
			{ActionType: aztables.TransactionTypeInsertReplace, Entity: body},
			generationAction(gen, etag, exists),
		})
		if batch.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("rules: storing rule group %q of namespace %q: %w", g.Name, namespace, err)
		}
		return nil
	}
	return fmt.Errorf("rules: storing rule group %q of namespace %q: %d attempts met other changes", g.Name, namespace, maxAttempts)
}

// Delete deletes group name of namespace (with the generation, one transaction), or answers
// an error wrapping ErrGroupNotFound.
func (s *Store) Delete(ctx context.Context, namespace, name string) error {
	key, err := GroupKey(namespace, name)
	if err != nil {
		return err
	}
	for range maxAttempts {
		gen, etag, exists, err := s.readGeneration(ctx)
		if err != nil {
			return err
		}
		keys, err := s.keys(ctx, filter.And(filter.Eq("PartitionKey", GroupsPartition), filter.Eq("RowKey", key)))
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return fmt.Errorf("%w: group %q of namespace %q", ErrGroupNotFound, name, namespace)
		}
		err = batch.Submit(ctx, s.client, GroupsPartition, []aztables.TransactionAction{
			deleteAction(key), generationAction(gen, etag, exists)})
		if batch.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("rules: deleting rule group %q of namespace %q: %w", name, namespace, err)
		}
		return nil
	}
	return fmt.Errorf("rules: deleting rule group %q of namespace %q: %d attempts met other changes", name, namespace, maxAttempts)
}

func deleteAction(key string) aztables.TransactionAction {
	body := entity.AppendEnd(entity.AppendKeys(nil, GroupsPartition, key))
	return aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, Entity: body}
}

// DeleteNamespace deletes every group of namespace, or answers an error wrapping
// ErrNamespaceNotFound when it has none. The groups go in transactions of up to 99, each
// with the generation: a namespace of more groups is deleted in several changes.
func (s *Store) DeleteNamespace(ctx context.Context, namespace string) error {
	if err := checkName("namespace", namespace); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRules, err)
	}
	f := filter.And(filter.Eq("PartitionKey", GroupsPartition),
		filter.Ge("RowKey", namespacePrefix(namespace)), filter.Lt("RowKey", namespaceEnd(namespace)))
	deleted := false
	for attempts := 0; attempts < maxAttempts; {
		gen, etag, exists, err := s.readGeneration(ctx)
		if err != nil {
			return err
		}
		keys, err := s.keys(ctx, f)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			if deleted {
				return nil
			}
			return fmt.Errorf("%w: %q", ErrNamespaceNotFound, namespace)
		}
		keys = keys[:min(len(keys), 99)]
		actions := make([]aztables.TransactionAction, 0, len(keys)+1)
		for _, k := range keys {
			actions = append(actions, deleteAction(k))
		}
		err = batch.Submit(ctx, s.client, GroupsPartition, append(actions, generationAction(gen, etag, exists)))
		if batch.IsConflict(err) {
			attempts++
			continue
		}
		if err != nil {
			return fmt.Errorf("rules: deleting namespace %q: %w", namespace, err)
		}
		deleted = true
	}
	return fmt.Errorf("rules: deleting namespace %q: %d attempts met other changes", namespace, maxAttempts)
}
