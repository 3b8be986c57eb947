package formatdoc

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every worked example of docs/format.md is checked by a test of the module, and every
// example a test asks for is in the document.
func TestEveryExampleChecked(t *testing.T) {
	blocks, err := Blocks(Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) < 15 {
		t.Fatalf("only %d examples in %s", len(blocks), Path())
	}
	call := regexp.MustCompile(`formatdoc\.(?:Hex|JSON|Lines|Block)\(t, "([^"]+)"\)`)
	root := filepath.Join(filepath.Dir(Path()), "..")
	checked := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			checked[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range blocks {
		if !checked[name] {
			t.Errorf("example %s is checked by no test", name)
		}
	}
	for name := range checked {
		if _, ok := blocks[name]; !ok {
			t.Errorf("a test checks example %s, which the document lacks", name)
		}
	}
}

func TestBlocks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "doc.md")
	doc := "# T\n\n```hex golden=a\n01 02 # two\n```\n\n```go\nnot an example\n```\n\n    ```\n\n```text golden=b\n x \n\n y\n```\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := Blocks(path)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(blocks))
	for n := range blocks {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b"}) || blocks["a"] != "01 02 # two\n" || blocks["b"] != " x \n\n y\n" {
		t.Errorf("blocks %q", blocks)
	}
	for _, bad := range []string{"```hex golden=a\n01\n```\n```hex golden=a\n02\n```\n", "```hex golden=a\n01\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Blocks(path); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
