package tsdb

import "github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

// CatalogClient is the client of the database's catalog table (its name + "m"), for the parts
// outside tsdb that keep entities of their own there, each in partitions no part of tsdb
// uses (the server's stored rule groups: partition "rulegroups"; docs/format.md, "The
// catalog"). They must not write in tsdb's partitions.
func (db *DB) CatalogClient() *aztables.Client { return db.catalog.Client }
