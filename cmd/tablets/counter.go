package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// counter is a policy.Transporter that counts what goes through it: requests (every
// attempt: it sits below the retry policy), HTTP body bytes each way, entities sent (one per
// single-entity write, one per operation of a batch) and entities received (the entities
// of query responses). It is safe for concurrent use.
type counter struct {
	next policy.Transporter

	requests, sent, received, entitiesSent, entitiesReceived atomic.Int64
	entityBytes                                              atomic.Int64
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
	return counts{c.requests.Load(), c.sent.Load(), c.received.Load(), c.entitiesSent.Load(), c.entitiesReceived.Load(), c.entityBytes.Load()}
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
	c.requests.Add(1)
	path := req.URL.Path
	last := path[strings.LastIndexByte(path, '/')+1:]
	isTables := strings.HasPrefix(last, "Tables")
	if req.Body != nil && req.Body != http.NoBody {
		switch {
		case req.Method == http.MethodPost && last == "$batch":
			body, err := replayableBody(req)
			if err != nil {
				return nil, err
			}
			c.sent.Add(int64(len(body)))
			// Each operation of a changeset is one part of type application/http.
			c.entitiesSent.Add(int64(bytes.Count(body, []byte("application/http"))))
			c.entityBytes.Add(batchEntityBytes(body))
		default:
			n := req.ContentLength
			if n < 0 {
				body, err := replayableBody(req)
				if err != nil {
					return nil, err
				}
				n = int64(len(body))
			}
			c.sent.Add(n)
			if !isTables {
				c.entitiesSent.Add(1)
				c.entityBytes.Add(n)
			}
		}
	}
	resp, err := c.next.Do(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if req.Method == http.MethodGet && !isTables && resp.StatusCode == http.StatusOK {
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.received.Add(int64(len(body)))
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
		return resp, nil
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.received}
	return resp, nil
}

// replayableBody reads req.Body and puts back an equivalent one.
func replayableBody(req *http.Request) ([]byte, error) {
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return b, nil
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
