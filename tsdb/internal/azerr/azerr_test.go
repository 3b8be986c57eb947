package azerr

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

func TestClassify(t *testing.T) {
	gone := fmt.Errorf("read: %w", &azcore.ResponseError{StatusCode: http.StatusNotFound, ErrorCode: string(aztables.TableNotFound)})
	missing := &azcore.ResponseError{StatusCode: http.StatusNotFound, ErrorCode: "ResourceNotFound"}
	conflict := &azcore.ResponseError{StatusCode: http.StatusConflict, ErrorCode: string(aztables.TableAlreadyExists)}
	for _, c := range []struct {
		err        error
		status     int
		isStatus   bool
		isGone     bool
		errorsText string
	}{
		{gone, http.StatusNotFound, true, true, "wrapped TableNotFound"},
		{missing, http.StatusNotFound, true, true, "a 404"},
		{conflict, http.StatusConflict, true, false, "a conflict"},
		{conflict, http.StatusNotFound, false, false, "a conflict asked as 404"},
		{errors.New("dial tcp: refused"), http.StatusNotFound, false, false, "not a reply"},
		{nil, http.StatusNotFound, false, false, "nil"},
	} {
		if got := IsStatus(c.err, c.status); got != c.isStatus {
			t.Errorf("%s: IsStatus %v", c.errorsText, got)
		}
		if got := IsTableGone(c.err); got != c.isGone {
			t.Errorf("%s: IsTableGone %v", c.errorsText, got)
		}
	}
}
