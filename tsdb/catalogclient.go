package tsdb

import "github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

// CatalogClient is the client of the database's catalog table (its name + "m"), for the
// entities other packages keep there, each in partitions of its own that docs/format.md
// names (the rule group leases of server/rules). tsdb never reads those partitions.
func (db *DB) CatalogClient() *aztables.Client { return db.catalog.Client }
