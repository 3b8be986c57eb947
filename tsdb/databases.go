package tsdb

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/filter"
)

// Databases returns the names of the databases on service whose names start with prefix,
// ascending: the tables named like a catalog (a database's name + "m") among those whose
// names lie between prefix and its successor (one request a 1,000 tables). prefix is letters
// and digits, starting with a letter, at most 40 characters; else the error wraps
// tablets.ErrInvalidOptions, before any request.
//
// Of a database's tables, only its catalog's name ends with "m" (the others end with a digit,
// "w" or "q"; see docs/format.md, "tsdb: table names"), so each catalog names one database. A
// database whose catalog was made by Open is listed, whoever made it.
func Databases(ctx context.Context, service *aztables.ServiceClient, prefix string) ([]string, error) {
	if service == nil {
		return nil, fmt.Errorf("tsdb: %w: nil service client", tablets.ErrInvalidOptions)
	}
	if err := validPrefix(prefix); err != nil {
		return nil, fmt.Errorf("tsdb: %w: %v", tablets.ErrInvalidOptions, err)
	}
	names, err := listTables(ctx, service, prefix, successor(prefix))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) || !strings.HasSuffix(n, "m") {
			continue
		}
		if db := n[:len(n)-1]; validName(db) == nil {
			out = append(out, db)
		}
	}
	slices.Sort(out) // by database name, not by catalog name ("a1m" < "am")
	return out, nil
}

// Exists reports whether the database name exists on service: whether its catalog table,
// made by Open, is there (one request). It creates nothing. A bad name gives an error
// wrapping tablets.ErrInvalidOptions, before any request.
func Exists(ctx context.Context, service *aztables.ServiceClient, name string) (bool, error) {
	if service == nil {
		return false, fmt.Errorf("tsdb: %w: nil service client", tablets.ErrInvalidOptions)
	}
	if err := validName(name); err != nil {
		return false, fmt.Errorf("tsdb: %w: %v", tablets.ErrInvalidOptions, err)
	}
	// A range rather than an equality: the catalog and the few catalogs of databases whose
	// names extend name + "m" (table names compare case-insensitively in Azure).
	catalog := name + "m"
	names, err := listTables(ctx, service, catalog, successor(catalog))
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if strings.EqualFold(n, catalog) {
			return true, nil
		}
	}
	return false, nil
}

// listTables lists the names of the tables in [from, to).
func listTables(ctx context.Context, service *aztables.ServiceClient, from, to string) ([]string, error) {
	f := filter.And(filter.Ge("TableName", from), filter.Lt("TableName", to)).String()
	var names []string
	for pager := service.NewListTablesPager(&aztables.ListTablesOptions{Filter: &f}); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("tsdb: list tables: %w", err)
		}
		for _, tb := range page.Tables {
			if tb.Name != nil {
				names = append(names, *tb.Name)
			}
		}
	}
	return names, nil
}

// successor is the least string after every string starting with s (s is letters and
// digits, so its last byte has a successor in ASCII).
func successor(s string) string { return s[:len(s)-1] + string(s[len(s)-1]+1) }

// validPrefix: letters and digits starting with a letter, 1 to maxNameLength characters.
func validPrefix(prefix string) error {
	if prefix == "" || len(prefix) > maxNameLength {
		return fmt.Errorf("prefix %q must be 1 to %d characters", prefix, maxNameLength)
	}
	for i, c := range prefix {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return fmt.Errorf("prefix %q must be letters and digits, starting with a letter", prefix)
		}
	}
	return nil
}
