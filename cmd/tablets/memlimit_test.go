package main

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"1073741824": 1 << 30, "512MiB": 512 << 20, "2GiB": 2 << 30, "3KiB": 3 << 10, "1TiB": 1 << 40, "77B": 77} {
		got, err := parseByteSize(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "-1GiB", "1.5GiB", "2GB", "GiB", "8388608TiB", "auto"} {
		_, err := parseByteSize(in)
		assert.Error(t, err, in)
	}
}

func TestResolveMemoryLimit(t *testing.T) {
	noEnv := func(string) string { return "" }
	v1 := "4:memory:/kubepods/pod1\n0::/\n"
	sys := fstest.MapFS{
		"memory/kubepods/pod1/memory.limit_in_bytes": {Data: []byte("2147483648\n")},
		"memory/memory.limit_in_bytes":               {Data: []byte("9223372036854771712\n")},
		"app/memory.max":                             {Data: []byte("1073741824\n")},
		"unlimited/memory.max":                       {Data: []byte("max\n")},
	}
	cases := []struct {
		name, flag, cgroup string
		env                func(string) string
		limit              int64
		keep               bool
		from               string
	}{
		{"a v1 cgroup's limit", "auto", v1, noEnv, 1932735283, false, "memory/kubepods/pod1/memory.limit_in_bytes"},
		{"a v2 cgroup's limit", "auto", "0::/app\n", noEnv, 966367641, false, "app/memory.max"},
		{"v2 max: none", "auto", "0::/unlimited\n", noEnv, math.MaxInt64, false, "no cgroup memory limit"},
		{"v1 at the root, unlimited", "auto", "4:memory:/\n", noEnv, math.MaxInt64, false, "no cgroup memory limit"},
		{"no cgroup file", "auto", "", noEnv, math.MaxInt64, false, "no cgroup memory limit"},
		{"GOMEMLIMIT wins over auto", "auto", v1, func(k string) string {
			if k == "GOMEMLIMIT" {
				return "300MiB"
			}
			return ""
		}, 0, true, "GOMEMLIMIT=300MiB"},
		{"a size wins over the cgroup", "512MiB", v1, noEnv, 512 << 20, false, "--memory-limit 512MiB"},
		{"none", "none", v1, noEnv, math.MaxInt64, false, "--memory-limit none"},
	}
	for _, c := range cases {
		got, err := resolveMemoryLimit(c.flag, c.env, sys, c.cgroup)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.limit, got.limit, c.name)
		assert.Equal(t, c.keep, got.keep, c.name)
		assert.Contains(t, got.from, c.from, c.name)
	}
	_, err := resolveMemoryLimit("lots", noEnv, sys, v1)
	assert.ErrorContains(t, err, `--memory-limit "lots"`)
}

func TestServeMemoryLimitChecked(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	r := cli(t, map[string]string{}, "", "serve", "--db", "metrics", "--memory-limit", "2GB")
	assert.Equal(t, exitUsage, r.code)
	assert.True(t, strings.Contains(r.stderr, "--memory-limit") && strings.Contains(r.stderr, "512MiB"), r.stderr)
	assert.Equal(t, prev, debug.SetMemoryLimit(-1), "a refused flag sets nothing")
}
