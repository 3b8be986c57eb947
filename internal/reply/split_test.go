package reply

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestSplitReply(t *testing.T) {
	for _, c := range []struct {
		body string
		want []string // nil with ok false
		ok   bool
	}{
		{`{"odata.metadata":"https://a/$metadata#t","value":[{"PartitionKey":"p","RowKey":"r","c1@odata.type":"Edm.Binary","c1":"AQI="},{"PartitionKey":"p","RowKey":"s"}]}`,
			[]string{`{"PartitionKey":"p","RowKey":"r","c1@odata.type":"Edm.Binary","c1":"AQI="}`, `{"PartitionKey":"p","RowKey":"s"}`}, true},
		{" {\n \"value\" : [ ] } \n", []string{}, true},
		{`{"value":[{"a":{"b":[1,2.5e3,-0,true,false,null,"x\"\u00e9"]}}],"x":{}}`, []string{`{"a":{"b":[1,2.5e3,-0,true,false,null,"x\"\u00e9"]}}`}, true},
		{`{}`, nil, false},                                   // no value
		{`{"value":[{}],"value":[]}`, nil, false},            // two
		{`{"val\u0075e":[{}]}`, nil, false},                  // an escaped name
		{`{"value":[1]}`, nil, false},                        // not objects
		{`{"value":{}}`, nil, false},                         // not an array
		{`{"value":[{"a":[}]}]}`, nil, false},                // mismatched
		{`{"value":[{"a":01}]}`, nil, false},                 // a bad number
		{`{"value":[{"a":"b"}]} x`, nil, false},              // trailing data
		{`{"value":[{"a":"b"},]}`, nil, false},               // a trailing comma
		{`{"value":[{"a":"b"}]`, nil, false},                 // cut short
		{`{"value":[{"a":"b\q"}]}`, nil, false},              // a bad escape
		{`{"value":[{"a":"` + "\x01" + `"}]}`, nil, false},   // a control character
		{`{"value":[{"a":` + nested(20) + `}]}`, nil, false}, // deeper than a reply
		{`[]`, nil, false},
		{``, nil, false},
	} {
		got, ok := Split([]byte(c.body))
		if ok != c.ok || (ok && len(got) != len(c.want)) {
			t.Errorf("Split(%q) = %q, %v; want %q, %v", c.body, got, ok, c.want, c.ok)
			continue
		}
		for i := range got {
			if string(got[i]) != c.want[i] {
				t.Errorf("Split(%q)[%d] = %s, want %s", c.body, i, got[i], c.want[i])
			}
			if cap(got[i]) != len(got[i]) {
				t.Errorf("entity %d has spare capacity: an append would write into the next", i)
			}
		}
	}
	// The entities are copies: the page's buffer may be reused.
	body := []byte(`{"value":[{"a":"b"}]}`)
	got, _ := Split(body)
	copy(body, bytes.Repeat([]byte{'x'}, len(body)))
	if string(got[0]) != `{"a":"b"}` {
		t.Errorf("the entity aliases the body: %s", got[0])
	}
}

func nested(n int) string {
	var b bytes.Buffer
	for range n {
		b.WriteByte('[')
	}
	for range n {
		b.WriteByte(']')
	}
	return b.String()
}

// FuzzSplitReply: what Split accepts, encoding/json accepts as an object with one
// member "value", an array of objects, and its entities are that array's elements.
func FuzzSplitReply(f *testing.F) {
	for _, s := range []string{
		`{"odata.metadata":"m","value":[{"PartitionKey":"p","RowKey":"r","V":1.5,"c@odata.type":"Edm.Binary","c":"AQI="}]}`,
		`{"value":[]}`, `{"value":[{"a":[1,{"b":null}]}],"n":"x"}`, `{"value":[{"a":"\ud83d\ude00"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := Split(body)
		if !ok {
			return
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(body, &members); err != nil {
			t.Fatalf("Split accepted what encoding/json rejects (%v): %q", err, body)
		}
		var value []map[string]json.RawMessage
		if err := json.Unmarshal(members["value"], &value); err != nil {
			t.Fatalf("value is not an array of objects (%v): %q", err, body)
		}
		var raw []json.RawMessage
		_ = json.Unmarshal(members["value"], &raw)
		if len(raw) != len(got) {
			t.Fatalf("%d entities, encoding/json %d: %q", len(got), len(raw), body)
		}
		for i := range raw {
			if !bytes.Equal(raw[i], got[i]) {
				t.Fatalf("entity %d = %q, encoding/json %q", i, got[i], raw[i])
			}
		}
	})
}
