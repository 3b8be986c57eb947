package reply

import (
	"bytes"

	"github.com/seed71701133/tablets/internal/jsonscan"
)

// Split splits the body of a Query Entities reply ({"value":[entity, ...]} with any
// other members, such as odata.metadata) into its entities' JSON, each copied out of body
// into a slice of its own (a cache that keeps an entity's bytes never pins the page).
// ok is false unless body is one valid JSON object holding exactly one member "value", an
// array of objects: the caller then lets another decoder say what is wrong.
//
// It is what lets a read decode a page once: aztables decodes a reply into maps and encodes
// every entity again before a reader decodes it a third time (tablets.ClientOptions).
func Split(body []byte) (entities [][]byte, ok bool) {
	var spans [][2]int
	found := false
	i := jsonscan.Space(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	i = jsonscan.Space(body, i+1)
	if i < len(body) && body[i] == '}' {
		return nil, false // no "value"
	}
	for {
		start := i
		end, err := jsonscan.Value(body, i)
		if err != nil || body[start] != '"' {
			return nil, false
		}
		name := body[start+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			return nil, false // an escaped name may spell "value": not the service's
		}
		i = jsonscan.Space(body, end)
		if i >= len(body) || body[i] != ':' {
			return nil, false
		}
		i = jsonscan.Space(body, i+1)
		if string(name) == "value" {
			if found {
				return nil, false // a second "value": encoding/json would take the last
			}
			found = true
			if spans, i, ok = splitArray(body, i); !ok {
				return nil, false
			}
		} else if i, ok = jsonscan.Strict(body, i, 0); !ok {
			return nil, false
		}
		i = jsonscan.Space(body, i)
		if i >= len(body) {
			return nil, false
		}
		if body[i] == '}' {
			break
		}
		if body[i] != ',' {
			return nil, false
		}
		i = jsonscan.Space(body, i+1)
	}
	if !found || jsonscan.Space(body, i+1) != len(body) {
		return nil, false
	}
	total := 0
	for _, s := range spans {
		total += s[1] - s[0]
	}
	// One allocation for every entity's copy: each is a full slice expression of its own.
	buf := make([]byte, 0, total)
	entities = make([][]byte, len(spans))
	for k, s := range spans {
		from := len(buf)
		buf = append(buf, body[s[0]:s[1]]...)
		entities[k] = buf[from:len(buf):len(buf)]
	}
	return entities, true
}

// splitArray reads a JSON array of objects at d[i] and returns each object's span.
func splitArray(d []byte, i int) (spans [][2]int, next int, ok bool) {
	if i >= len(d) || d[i] != '[' {
		return nil, i, false
	}
	i = jsonscan.Space(d, i+1)
	if i < len(d) && d[i] == ']' {
		return nil, i + 1, true
	}
	for {
		if i >= len(d) || d[i] != '{' {
			return nil, i, false
		}
		end, ok := jsonscan.Strict(d, i, 0)
		if !ok {
			return nil, i, false
		}
		spans = append(spans, [2]int{i, end})
		i = jsonscan.Space(d, end)
		if i >= len(d) {
			return nil, i, false
		}
		if d[i] == ']' {
			return spans, i + 1, true
		}
		if d[i] != ',' {
			return nil, i, false
		}
		i = jsonscan.Space(d, i+1)
	}
}
