package tablets_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNoBinariesTracked keeps build outputs and other large or binary files out of the
// repository: a committed `go build` of the command once added 31 MB to every clone.
// Fuzz corpora, golden files and the npm lockfile are text and stay well under the limit.
func TestNoBinariesTracked(t *testing.T) {
	const maxBytes = 512 << 10
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files (the tests run in a clone of the repository): %v", err)
	}
	files := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(files) < 50 {
		t.Fatalf("git ls-files listed %d files: not the repository", len(files))
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		head := b[:min(len(b), 8000)]
		switch {
		case len(b) > maxBytes:
			t.Errorf("%s is tracked and holds %d bytes (over %d): a build output or data that belongs elsewhere", name, len(b), maxBytes)
		case bytes.IndexByte(head, 0) >= 0:
			t.Errorf("%s is tracked and is binary (a NUL byte in its first 8000): ignore build outputs in .gitignore", name)
		}
	}
}
