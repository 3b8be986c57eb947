// Package formatdoc reads the worked examples of docs/format.md for the golden tests that
// check them against the code, so that the document and the code cannot drift.
// Part of the test kit (internal/testkit): only tests and other kit packages import it.
//
// An example is a fenced block (its fences at the start of their lines) whose info string
// holds golden=NAME:
//
//	```hex golden=labels
//	01                     # version
//	02                     # two labels
//	```
//
// Hex blocks are bytes in hex, with anything after a "#" on a line a comment and blanks
// ignored; JSON blocks compare after json.Compact; text blocks line by line.
package formatdoc

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Path is docs/format.md of this module.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "format.md")
}

// Blocks returns the worked examples of the document at path by name.
func Blocks(path string) (map[string]string, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var name string
	var body strings.Builder
	in := false
	for i, line := range strings.Split(string(doc), "\n") {
		trimmed := strings.TrimRight(line, " \t\r") // fences start the line
		switch {
		case !in && strings.HasPrefix(trimmed, "```"):
			in, name = true, ""
			body.Reset()
			for _, f := range strings.Fields(strings.TrimPrefix(trimmed, "```")) {
				if n, ok := strings.CutPrefix(f, "golden="); ok {
					name = n
				}
			}
			if _, dup := out[name]; dup && name != "" {
				return nil, fmt.Errorf("%s:%d: a second example %q", path, i+1, name)
			}
		case in && trimmed == "```":
			in = false
			if name != "" {
				out[name] = body.String()
			}
		case in:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if in {
		return nil, fmt.Errorf("%s: a fenced block is not closed", path)
	}
	return out, nil
}

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Block returns the example name of docs/format.md, failing t if there is none.
func Block(t TB, name string) string {
	t.Helper()
	blocks, err := Blocks(Path())
	if err != nil {
		t.Fatalf("%v", err)
	}
	b, ok := blocks[name]
	if !ok {
		t.Fatalf("docs/format.md has no example golden=%s", name)
	}
	return b
}

// Hex returns the bytes of a hex example: comments after "#" and blanks dropped.
func Hex(t TB, name string) []byte {
	t.Helper()
	var digits strings.Builder
	for _, line := range strings.Split(Block(t, name), "\n") {
		line, _, _ = strings.Cut(line, "#")
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(digits.String())
	if err != nil {
		t.Fatalf("example %s: %v", name, err)
	}
	return b
}

// JSON returns a JSON example compacted.
func JSON(t TB, name string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(Block(t, name))); err != nil {
		t.Fatalf("example %s: %v", name, err)
	}
	return b.Bytes()
}

// Lines returns the non-blank lines of a text example, trimmed.
func Lines(t TB, name string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(Block(t, name), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}
