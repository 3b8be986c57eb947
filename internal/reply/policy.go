package reply

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// Slot receives the entities of one query's reply, split by the Policy.
type Slot struct {
	entities [][]byte
	caught   bool
}

type slotKey struct{}

// Catch returns ctx carrying a new Slot: the reply to a query sent with it through a
// client with the Policy has its entities put in the Slot, and what the SDK decodes of the
// reply emptied of them. A client without the Policy leaves the Slot empty and the reply
// whole, so a reader takes the Slot's entities when it caught some and the SDK's otherwise.
func Catch(ctx context.Context) (context.Context, *Slot) {
	s := &Slot{}
	return context.WithValue(ctx, slotKey{}, s), s
}

// Entities returns the entities caught, and whether a reply was caught.
func (s *Slot) Entities() ([][]byte, bool) { return s.entities, s.caught }

// emptyReply is what the SDK is left to decode of a reply whose entities were caught.
var emptyReply = []byte(`{"value":[]}`)

// Policy is a per-call policy of an aztables client (tablets.ClientOptions installs it):
// a successful GET whose context carries a Slot (Catch) has its body split into its
// entities (Split), which go to the Slot, and the SDK gets an empty entity list with the
// same headers (the continuation) to decode. The SDK would decode every entity into a map
// and encode it again to JSON, three times the work of the one decoding a reader does; on a
// page of staged columns that was most of a read's CPU. A body Split does not accept is
// left whole, for the SDK to decode or reject as before.
type Policy struct{}

// Do implements policy.Policy.
func (Policy) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if err != nil || resp == nil || resp.StatusCode != http.StatusOK || req.Raw().Method != http.MethodGet {
		return resp, err
	}
	slot, _ := req.Raw().Context().Value(slotKey{}).(*Slot)
	if slot == nil {
		return resp, nil
	}
	body, rerr := runtime.Payload(resp)
	if rerr != nil {
		return resp, nil // the SDK reads the body again and reports it
	}
	entities, ok := Split(body)
	if !ok {
		return resp, nil
	}
	slot.entities, slot.caught = entities, true
	resp.Body = io.NopCloser(bytes.NewReader(emptyReply))
	resp.ContentLength = int64(len(emptyReply))
	return resp, nil
}
