// Package soak is the soak benchmark of `tablets serve` (`tablets soak`): it runs the server
// as a subprocess in front of a storage account reached through an outage proxy, writes to
// it from several tenants at a fixed rate as Prometheus does, queries it as Grafana's
// dashboards do, cuts the account for a while, and at the end reads every tenant's series
// back and compares them with what the server acknowledged. The report says whether the
// server's memory and goroutines stayed flat, how fast the queries were, whether every
// acknowledged sample was stored, and whether any answer held another tenant's series.
//
// It holds no test code, so that the command binary does not link the testing package.
package soak
