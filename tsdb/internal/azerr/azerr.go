// Package azerr classifies the account's error replies for the parts of a tsdb database: a
// status, a table that does not exist. It is a leaf: it knows nothing of tsdb's tables.
package azerr

import (
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// IsStatus reports an error reply of the HTTP status.
func IsStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

// IsTableGone reports an error of a table that does not exist (never made, or dropped
// meanwhile).
func IsTableGone(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && (re.ErrorCode == string(aztables.TableNotFound) || re.StatusCode == http.StatusNotFound)
}
