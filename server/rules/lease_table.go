package rules

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// LeaseTable holds the leases of rule groups (LeaseOptions.Table): package server gives the
// catalog table of the tenant's database (NewLeaseTable). Its methods are safe for
// concurrent use.
type LeaseTable interface {
	// Get reads the entity of the keys: its JSON as the service answers it (with its
	// Timestamp), its ETag, and the service's time when it answered (its reply's Date).
	// An error wrapping ErrLeaseNotFound if there is none.
	Get(ctx context.Context, pk, rk string) (body []byte, etag string, now time.Time, err error)
	// Insert adds the entity body; an error wrapping ErrLeaseConflict if one exists.
	Insert(ctx context.Context, body []byte) (etag string, err error)
	// Replace replaces the entity of body's keys if its ETag is still etag; an error
	// wrapping ErrLeaseConflict if not (or if it is gone).
	Replace(ctx context.Context, body []byte, etag string) (newETag string, err error)
}

// Errors of a LeaseTable.
var (
	// ErrLeaseNotFound: no such lease entity.
	ErrLeaseNotFound = errors.New("rules: no such lease entity")
	// ErrLeaseConflict: a conditional write refused (the entity changed, or exists).
	ErrLeaseConflict = errors.New("rules: the lease entity changed")
)

// NewLeaseTable is a LeaseTable over an Azure table. mark, if set, is applied to the
// context of every request (package server puts lease requests in the ingest class, which
// never waits behind queries).
func NewLeaseTable(client *aztables.Client, mark func(context.Context) context.Context) LeaseTable {
	if mark == nil {
		mark = func(ctx context.Context) context.Context { return ctx }
	}
	return azureLeases{client: client, mark: mark}
}

type azureLeases struct {
	client *aztables.Client
	mark   func(context.Context) context.Context
}

func (a azureLeases) Get(ctx context.Context, pk, rk string) ([]byte, string, time.Time, error) {
	var raw *http.Response
	resp, err := a.client.GetEntity(runtime.WithCaptureResponse(a.mark(ctx), &raw), pk, rk, nil)
	if status(err) == http.StatusNotFound {
		return nil, "", time.Time{}, fmt.Errorf("%w: %s %s", ErrLeaseNotFound, pk, rk)
	}
	if err != nil {
		return nil, "", time.Time{}, err
	}
	if raw == nil {
		return nil, "", time.Time{}, errors.New("rules: lease read: no reply captured")
	}
	now, err := http.ParseTime(raw.Header.Get("Date"))
	if err != nil {
		return nil, "", time.Time{}, fmt.Errorf("rules: lease read: the reply's Date %q: %v", raw.Header.Get("Date"), err)
	}
	return resp.Value, string(resp.ETag), now, nil
}

func (a azureLeases) Insert(ctx context.Context, body []byte) (string, error) {
	resp, err := a.client.AddEntity(a.mark(ctx), body, nil)
	if status(err) == http.StatusConflict {
		return "", fmt.Errorf("%w: it exists", ErrLeaseConflict)
	}
	if err != nil {
		return "", err
	}
	return string(resp.ETag), nil
}

func (a azureLeases) Replace(ctx context.Context, body []byte, etag string) (string, error) {
	e := azcore.ETag(etag)
	resp, err := a.client.UpdateEntity(a.mark(ctx), body, &aztables.UpdateEntityOptions{IfMatch: &e, UpdateMode: aztables.UpdateModeReplace})
	if s := status(err); s == http.StatusPreconditionFailed || s == http.StatusNotFound || s == http.StatusConflict {
		return "", fmt.Errorf("%w: %d", ErrLeaseConflict, s)
	}
	if err != nil {
		return "", err
	}
	return string(resp.ETag), nil
}

// status is the HTTP status of an Azure error (0 if err is not one).
func status(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}
