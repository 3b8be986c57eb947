package rules

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

const exampleGroup = "name: cpu\nrules:\n  - record: job:cpu:rate5m\n    expr: sum by (job) (rate(cpu_seconds_total[5m]))\n"

// The worked examples of docs/format.md, "Rule groups".
func TestStoreFormatDoc(t *testing.T) {
	g, err := ParseGroup([]byte(exampleGroup))
	require.NoError(t, err)
	doc, err := MarshalGroup(g)
	require.NoError(t, err)
	require.Equal(t, strings.Join(formatdoc.Lines(t, "rule-group-yaml"), "\n"), strings.Join(trimLines(string(doc)), "\n"))
	require.Equal(t, exampleGroup, string(doc))
	key, err := GroupKey("team/a", "cpu")
	require.NoError(t, err)
	require.Equal(t, string(formatdoc.JSON(t, "rule-group")), string(appendGroupEntity(nil, key, doc)))
	sg, err := decodeGroupEntity(formatdoc.JSON(t, "rule-group"))
	require.NoError(t, err)
	require.Equal(t, StoredGroup{Namespace: "team/a", Group: g}, sg)

	require.Equal(t, string(formatdoc.JSON(t, "rule-generation")), string(appendGenerationEntity(nil, 7)))
	gen, err := decodeGenerationEntity(formatdoc.JSON(t, "rule-generation"))
	require.NoError(t, err)
	require.Equal(t, uint64(7), gen)
	// The escaping example of the text.
	require.Equal(t, "ops ~231 ~7E 100~25", escapeName("ops #1 ~ 100%"))
}

func trimLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func TestEscapeName(t *testing.T) {
	for _, c := range []struct{ name, key string }{
		{"plain-name_1.x", "plain-name_1.x"},
		{"team/a", "team~2Fa"},
		{`a\b#c?d`, "a~5Cb~23c~3Fd"},
		{"a|b~c", "a~7Cb~7Ec"},
		{"it's 100%", "it~27s 100~25"},
		{"tab\there\n", "tab~09here~0A"},
		{"del\x7f c1\u0085 é 日本", "del~7F c1~C2~85 é 日本"},
		{"emoji 🙂", "emoji 🙂"},
	} {
		got := escapeName(c.name)
		require.Equal(t, c.key, got, c.name)
		require.NoError(t, entity.ValidateKey(got), c.name)
		back, ok := unescapeName(got)
		require.True(t, ok, c.key)
		require.Equal(t, c.name, back)
	}
	for _, bad := range []string{"", "a~", "a~2", "a~2f", "a~G0", "a~41", "a|b", "a/b", "~FF", "~C3", "~C2~85~"} {
		_, ok := unescapeName(bad)
		require.False(t, ok, bad)
	}
	// Keys of a namespace are in its range, and no other namespace's are.
	k1, err := GroupKey("a", "z")
	require.NoError(t, err)
	k2, err := GroupKey("a|b", "c")
	require.NoError(t, err)
	k3, err := GroupKey("a b", "c")
	require.NoError(t, err)
	for _, k := range []string{k1} {
		require.True(t, k >= namespacePrefix("a") && k < namespaceEnd("a"), k)
	}
	for _, k := range []string{k2, k3} {
		require.False(t, k >= namespacePrefix("a") && k < namespaceEnd("a"), k)
	}
	ns, name, ok := splitGroupKey(k2)
	require.True(t, ok)
	require.Equal(t, []string{"a|b", "c"}, []string{ns, name})

	// Names too long for a key, empty, or not UTF-8.
	_, err = GroupKey(strings.Repeat("n", 300), strings.Repeat("g", 300))
	require.ErrorIs(t, err, ErrBadRules)
	_, err = GroupKey(strings.Repeat("/", 200), "g") // 600 characters once escaped
	require.ErrorIs(t, err, ErrBadRules)
	_, err = GroupKey("", "g")
	require.ErrorIs(t, err, ErrBadRules)
	_, err = GroupKey("ns", "\xff")
	require.ErrorIs(t, err, ErrBadRules)
	_, err = GroupKey(strings.Repeat("n", 250), strings.Repeat("g", 250))
	require.NoError(t, err)
}

// A group of more than 64 KiB of YAML is split in parts, and read back whole.
func TestGroupEntityParts(t *testing.T) {
	g := bigGroup(t, "big", 150<<10)
	doc, err := MarshalGroup(g)
	require.NoError(t, err)
	require.Greater(t, len(doc), 2*partBytes)
	body := appendGroupEntity(nil, "ns|big", doc)
	for _, p := range []string{`"Y0@odata.type"`, `"Y1@odata.type"`, `"Y2@odata.type"`} {
		require.Contains(t, string(body), p)
	}
	require.NotContains(t, string(body), `"Y3`)
	sg, err := decodeGroupEntity(body)
	require.NoError(t, err)
	require.Equal(t, "ns", sg.Namespace)
	again, err := MarshalGroup(sg.Group)
	require.NoError(t, err)
	require.Equal(t, string(doc), string(again))
}

// bigGroup is a valid group of about size bytes of YAML: alerts with long annotations.
func bigGroup(t *testing.T, name string, size int) rulefmt.RuleGroup {
	t.Helper()
	g := rulefmt.RuleGroup{Name: name}
	for i := 0; i*8100 < size; i++ {
		g.Rules = append(g.Rules, rulefmt.Rule{Alert: fmt.Sprintf("A%d", i), Expr: "up == 0",
			Annotations: map[string]string{"description": strings.Repeat("word ", 1600)}})
	}
	return g
}

// A reader rejects what the writer never writes.
func TestDecodeGroupEntityRejects(t *testing.T) {
	doc := []byte(exampleGroup)
	good := string(appendGroupEntity(nil, "team~2Fa|cpu", doc))
	b64 := base64.StdEncoding.EncodeToString(doc)
	for name, bad := range map[string]string{
		"another version":        strings.Replace(good, `"V":1`, `"V":2`, 1),
		"no version":             strings.Replace(good, `"V":1,"V@odata.type":"Edm.Double",`, ``, 1),
		"length not theirs":      strings.Replace(good, `"L":97`, `"L":96`, 1),
		"length zero":            strings.Replace(good, `"L":97`, `"L":0`, 1),
		"length too large":       strings.Replace(good, `"L":97`, `"L":983041`, 1),
		"a fractional length":    strings.Replace(good, `"L":97,"L@odata.type":"Edm.Double"`, `"L":97.5`, 1),
		"another partition":      strings.Replace(good, `"rulegroups"`, `"rules"`, 1),
		"a key without |":        strings.Replace(good, `team~2Fa|cpu`, `team~2Facpu`, 1),
		"a key badly escaped":    strings.Replace(good, `team~2Fa|cpu`, `team~2fa|cpu`, 1),
		"a key not escaped":      strings.Replace(good, `team~2Fa|cpu`, `team/a|cpu`, 1),
		"the name not the key's": strings.Replace(good, `team~2Fa|cpu`, `team~2Fa|mem`, 1),
		"a missing part":         strings.Replace(good, `,"Y0@odata.type":"Edm.Binary","Y0":"`+b64+`"`, ``, 1),
		"an extra part":          strings.Replace(good, `}`, `,"Y1@odata.type":"Edm.Binary","Y1":"AA=="}`, 1),
		"a part named Y01":       strings.Replace(good, `"Y0"`, `"Y00"`, 1),
		"a part twice":           strings.Replace(good, `}`, `,"Y0@odata.type":"Edm.Binary","Y0":"`+b64+`"}`, 1),
		"a part not base64":      strings.Replace(good, b64, "!!!!", 1),
		"a part a Double":        strings.Replace(good, `"Y0@odata.type":"Edm.Binary","Y0":"`+b64+`"`, `"Y0":1.5`, 1),
		"bad YAML":               string(appendGroupEntity(nil, "ns|cpu", []byte("name: cpu\nrules: [\n"))),
		"a bad expression":       string(appendGroupEntity(nil, "ns|cpu", []byte("name: cpu\nrules:\n  - record: a\n    expr: sum(\n"))),
		"an unknown field":       string(appendGroupEntity(nil, "ns|cpu", []byte("name: cpu\nsource_tenants: [a]\nrules: []\n"))),
		"not JSON":               `{"PartitionKey":`,
	} {
		_, err := decodeGroupEntity([]byte(bad))
		require.ErrorIs(t, err, ErrStoredFormat, name)
	}
	for _, bad := range []string{
		`{"PartitionKey":"rulegroups","RowKey":"generation","V":2,"G":1}`,
		`{"PartitionKey":"rulegroups","RowKey":"generation","V":1,"G":1.5}`,
		`{"PartitionKey":"rulegroups","RowKey":"generation","V":1,"G":-1}`,
		`{"PartitionKey":"rulegroups","RowKey":"generation","V":1}`,
		`{"PartitionKey":"rulegroups","RowKey":"ns|g","V":1,"G":1}`,
	} {
		_, err := decodeGenerationEntity([]byte(bad))
		require.ErrorIs(t, err, ErrStoredFormat, bad)
	}
}

// FuzzDecodeGroupEntity: hostile entities are rejected, never a panic; what decodes encodes
// back to an entity that decodes to the same group.
func FuzzDecodeGroupEntity(f *testing.F) {
	doc := []byte(exampleGroup)
	f.Add(appendGroupEntity(nil, "team~2Fa|cpu", doc))
	f.Add(appendGroupEntity(nil, "a~7Cb|c~7Ed", []byte("name: c~d\ninterval: 1m\nrules:\n  - alert: A\n    expr: up == 0\n    for: 5m\n    labels:\n      s: x\n")))
	f.Add(appendGenerationEntity(nil, 3))
	f.Add([]byte(`{"PartitionKey":"rulegroups","RowKey":"a|b","V":1,"L":3,"Y0@odata.type":"Edm.Binary","Y0":"YToK"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		sg, err := decodeGroupEntity(raw)
		if err != nil {
			if !errors.Is(err, ErrStoredFormat) {
				t.Fatalf("an error not wrapping ErrStoredFormat: %v", err)
			}
			return
		}
		key, err := GroupKey(sg.Namespace, sg.Group.Name)
		if err != nil {
			t.Fatalf("decoded names that make no key: %v", err)
		}
		again, err := MarshalGroup(sg.Group)
		if err != nil {
			t.Fatal(err)
		}
		sg2, err := decodeGroupEntity(appendGroupEntity(nil, key, again))
		if err != nil {
			t.Fatalf("re-encoded does not decode: %v", err)
		}
		again2, _ := MarshalGroup(sg2.Group)
		if sg2.Namespace != sg.Namespace || !bytes.Equal(again, again2) {
			t.Fatalf("re-encoded decodes to another group")
		}
	})
}

// FuzzEscapeName: every valid name escapes to a valid key, and back.
func FuzzEscapeName(f *testing.F) {
	for _, s := range []string{"team/a", "a|b~c", "it's 100%", "\x00\x1f\x7f\u0085", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || !utf8.ValidString(s) {
			return
		}
		k := escapeName(s)
		if strings.ContainsRune(k, '|') {
			t.Fatalf("%q escapes to %q, with a |", s, k)
		}
		for _, r := range k {
			if r != ' ' && (r < 0x20 || (r >= 0x7f && r <= 0x9f) || strings.ContainsRune(`/\#?'%`, r)) {
				t.Fatalf("%q escapes to %q, with %q", s, k, r)
			}
		}
		back, ok := unescapeName(k)
		if !ok || back != s {
			t.Fatalf("%q -> %q -> %q, %v", s, k, back, ok)
		}
	})
}

// ParseGroup refuses what Prometheus refuses in a rule file, naming the group and the rule.
func TestParseGroup(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"", "an empty rule group"},
		{"name: g\nrules: [\n", "yaml"},
		{"name: g\nfoo: 1\nrules: []\n", "field foo not found"},
		{"name: g\nrules:\n  - record: a\n    expr: up\n    expr: up\n", `mapping key "expr" already defined`},
		{"rules: []\n", "the group has no name"},
		{"name: g\nrules:\n  - record: a\n    expr: sum(\n", `4:11: group "g", rule 1, "a": could not parse expression`},
		{"name: g\nrules:\n  - alert: B\n    expr: up\n    annotations:\n      s: '{{ $labels. }}'\n", `group "g", rule 1, "B": annotation "s": template`},
		{"name: g\nrules:\n  - record: a\n    alert: b\n    expr: up\n", `only one of 'record' and 'alert' must be set`},
		{"name: g\nrules:\n  - expr: up\n", `one of 'record' or 'alert' must be set`},
		{"name: g\nrules:\n  - record: 'a{b}'\n    expr: up\n", `braces present`},
		{"name: g\nlabels:\n  __name__: x\nrules: []\n", "invalid label name"},
		{"name: g\nrules: []\n---\nname: h\nrules: []\n", "more than one YAML document"},
		{"- name: g\n", "cannot unmarshal"},
	} {
		_, err := ParseGroup([]byte(c.doc))
		require.ErrorIs(t, err, ErrBadRules, c.doc)
		require.Contains(t, err.Error(), c.want, c.doc)
	}
	g, err := ParseGroup([]byte("name: g\ninterval: 30s\nquery_offset: 1m\nlimit: 10\nlabels: {team: a}\nrules:\n  - alert: A\n    expr: up == 0\n    for: 5m\n    keep_firing_for: 1m\n"))
	require.NoError(t, err)
	require.Equal(t, "g", g.Name)
	require.Len(t, g.Rules, 1)
}

func TestParseNamespaceFile(t *testing.T) {
	nf, err := ParseNamespaceFile("dir/alerts.yml", []byte("groups:\n  - name: a\n    rules: []\n  - name: b\n    rules: []\n"))
	require.NoError(t, err)
	require.Equal(t, "alerts", nf.Namespace)
	require.Len(t, nf.Groups, 2)
	nf, err = ParseNamespaceFile("dir/x.yaml", []byte("namespace: team/a\ngroups:\n  - name: a\n    rules: []\n"))
	require.NoError(t, err)
	require.Equal(t, "team/a", nf.Namespace)
	for _, c := range []struct{ doc, want string }{
		{"groups:\n  - name: a\n    rules: []\n  - name: a\n    rules: []\n", `group name "a" is repeated`},
		{"namespace: ''\ngroups: []\n", "an empty namespace"},
		{"groups:\n  - name: a\n    rules:\n      - record: x\n        expr: sum(\n", `group "a", rule 1, "x"`},
		{"group: []\n", "field group not found"},
	} {
		_, err := ParseNamespaceFile("dir/f.yml", []byte(c.doc))
		require.ErrorIs(t, err, ErrBadRules, c.doc)
		require.Contains(t, err.Error(), c.want, c.doc)
		require.Contains(t, err.Error(), "dir/f.yml", c.doc)
	}
}

func TestMain(m *testing.M) { azurite.Main(m) }
