package main

import (
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
)

// memoryLimitRatio is the share of a container's memory that --memory-limit auto gives the
// Go heap (as Prometheus' --auto-gomemlimit.ratio): the rest is for stacks, the runtime and
// what the kernel counts beside the heap.
const memoryLimitRatio = 0.9

// memoryLimit is what --memory-limit asks of the runtime: limit bytes (math.MaxInt64: no
// limit), or keep the runtime's own (GOMEMLIMIT, read when the process started). from says
// where the limit came from, for the log.
type memoryLimit struct {
	limit int64
	keep  bool
	from  string
}

// resolveMemoryLimit reads --memory-limit: "auto" is GOMEMLIMIT when it is set, else 90% of
// the memory of the process's cgroup (v2 memory.max, v1 memory.limit_in_bytes, read from
// sys, the root of /sys/fs/cgroup, and the process's /proc/self/cgroup), else none; "none"
// is no limit, whatever GOMEMLIMIT says; otherwise a size in GOMEMLIMIT's syntax (1073741824,
// 512MiB, 2GiB).
func resolveMemoryLimit(flag string, env func(string) string, sys fs.FS, selfCgroup string) (memoryLimit, error) {
	switch flag {
	case "none":
		return memoryLimit{limit: math.MaxInt64, from: "--memory-limit none"}, nil
	case "auto":
		if v := env("GOMEMLIMIT"); v != "" {
			return memoryLimit{keep: true, from: "GOMEMLIMIT=" + v}, nil
		}
		if n, path, ok := cgroupMemory(sys, selfCgroup); ok {
			return memoryLimit{limit: int64(memoryLimitRatio * float64(n)), from: fmt.Sprintf("%.0f%% of the cgroup's %d bytes (%s)", 100*memoryLimitRatio, n, path)}, nil
		}
		return memoryLimit{limit: math.MaxInt64, from: "no cgroup memory limit"}, nil
	}
	n, err := parseByteSize(flag)
	if err != nil {
		return memoryLimit{}, fmt.Errorf("--memory-limit %q: %w (auto, none, or a size such as 512MiB)", flag, err)
	}
	return memoryLimit{limit: n, from: "--memory-limit " + flag}, nil
}

// cgroupMemory is the memory limit of the process's cgroup, and the file it came from: the
// first of its own cgroup's and the root's, of v2 then v1, that sets one.
func cgroupMemory(sys fs.FS, selfCgroup string) (int64, string, bool) {
	var files []string
	for line := range strings.Lines(selfCgroup) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		dir := strings.Trim(f[2], "/")
		switch {
		case f[0] == "0" && f[1] == "":
			files = append(files, joinCgroup(dir, "memory.max"))
		case strings.Contains(","+f[1]+",", ",memory,"):
			files = append(files, joinCgroup("memory/"+dir, "memory.limit_in_bytes"))
		}
	}
	files = append(files, "memory.max", "memory/memory.limit_in_bytes")
	for _, name := range files {
		b, err := fs.ReadFile(sys, name)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(v, 10, 64)
		// v2 says "max"; v1 says a number near MaxInt64, rounded to a page.
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			continue
		}
		return n, "/sys/fs/cgroup/" + name, true
	}
	return 0, "", false
}

func joinCgroup(dir, file string) string {
	if dir = strings.Trim(dir, "/"); dir == "" {
		return file
	}
	return dir + "/" + file
}

// parseByteSize parses a size as GOMEMLIMIT does: a number of bytes, with an optional
// unit B, KiB, MiB, GiB or TiB.
func parseByteSize(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	shift := uint(0)
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, shift = v, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("not a positive number of bytes")
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("too large")
	}
	return n << shift, nil
}
