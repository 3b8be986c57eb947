package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Bad flags are usage errors, found before anything starts (no Azurite, no server).
func TestSoakUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tenants", "0"}, "0 tenants"},
		{[]string{"--servers", "0"}, "--servers 0: at least 1"},
		{[]string{"--servers", "-2"}, "--servers -2: at least 1"},
		{[]string{"--servers", "65"}, "65 servers: 1 to 64"},
		{[]string{"--servers", "x"}, "servers"},
		{[]string{"--rate", "-5"}, "rate"},
		{[]string{"--rate", "NaN"}, "rate"},
		{[]string{"--duration", "0s"}, "duration"},
		{[]string{"--duration", "30s"}, "outage"}, // the default outage, 60s, does not fit
		{[]string{"--duration", "2m", "--outage-at", "90s", "--outage", "40s"}, "outage"},
		{[]string{"--connection-string", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=a2V5;TableEndpoint=https://a.table.core.windows.net/"}, "http"},
		{[]string{"--connection-string", "AccountName=a;AccountKey=a2V5"}, "TableEndpoint"},
	} {
		r := cli(t, nil, "", append([]string{"soak"}, tc.args...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.line(t), tc.want, "%v", tc.args)
	}
}
