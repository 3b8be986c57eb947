package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/seed71701133/tablets/internal/meter"
)

// counter is a policy.Transporter that counts what goes through it: requests (every
// attempt: it sits below the retry policy) and HTTP body bytes each way (measured as the
// test harness measures them), entities sent (one per single-entity write, one per
// operation of a batch) and entities received (the entities of query responses). It is
// safe for concurrent use.
type counter struct {
	next policy.Transporter

	wire                                        meter.Meter
	entitiesSent, entitiesReceived, entityBytes atomic.Int64
}

// counts is a snapshot of a counter.
type counts struct {
	Requests, BytesSent, BytesReceived, EntitiesSent, EntitiesReceived int64
	// EntityBytes is the JSON of the entities written: what a table stores (keys and
	// properties), without the requests' framing.
	EntityBytes int64
}

func (c counts) sub(o counts) counts {
	return counts{c.Requests - o.Requests, c.BytesSent - o.BytesSent, c.BytesReceived - o.BytesReceived,
		c.EntitiesSent - o.EntitiesSent, c.EntitiesReceived - o.EntitiesReceived, c.EntityBytes - o.EntityBytes}
}

func (c *counter) snapshot() counts {
	w := c.wire.Counts()
	return counts{w.Requests, w.BytesSent, w.BytesReceived, c.entitiesSent.Load(), c.entitiesReceived.Load(), c.entityBytes.Load()}
}

// batchEntityBytes is the size of the JSON bodies of a batch's operations: each is an HTTP
// request ("... HTTP/1.1", headers, a blank line) whose body runs to the next boundary.
func batchEntityBytes(body []byte) int64 {
	var n int64
	for {
		i := bytes.Index(body, []byte(" HTTP/1.1\r\n"))
		if i < 0 {
			return n
		}
		body = body[i:]
		j := bytes.Index(body, []byte("\r\n\r\n"))
		if j < 0 {
			return n
		}
		body = body[j+4:]
		end := bytes.Index(body, []byte("\r\n--"))
		if end < 0 {
			end = len(body)
		}
		n += int64(len(bytes.TrimSpace(body[:end])))
		body = body[end:]
	}
}

// Do counts req and forwards it.
func (c *counter) Do(req *http.Request) (*http.Response, error) {
	path := req.URL.Path
	last := path[strings.LastIndexByte(path, '/')+1:]
	isTables := strings.HasPrefix(last, "Tables")
	if req.Body != nil && req.Body != http.NoBody {
		switch {
		case req.Method == http.MethodPost && last == "$batch":
			body, err := meter.ReadBody(req)
			if err != nil {
				return nil, err
			}
			// Each operation of a changeset is one part of type application/http.
			c.entitiesSent.Add(int64(bytes.Count(body, []byte("application/http"))))
			c.entityBytes.Add(batchEntityBytes(body))
		case !isTables:
			n := req.ContentLength
			if n <= 0 {
				body, err := meter.ReadBody(req)
				if err != nil {
					return nil, err
				}
				n = int64(len(body))
			}
			c.entitiesSent.Add(1)
			c.entityBytes.Add(n)
		}
	}
	resp, err := c.wire.Send(c.next, req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if req.Method == http.MethodGet && !isTables && resp.StatusCode == http.StatusOK {
		// Read the page here (the meter counts its bytes) to count its entities.
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		var page struct {
			Value *[]json.RawMessage `json:"value"`
		}
		if json.Unmarshal(body, &page) == nil {
			if page.Value != nil {
				c.entitiesReceived.Add(int64(len(*page.Value)))
			} else {
				c.entitiesReceived.Add(1) // a point read
			}
		}
	}
	return resp, nil
}
