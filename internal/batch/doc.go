// Package batch sends entity group transactions and makes their failures legible: aztables
// reports a failed transaction as an *azcore.ResponseError with status 202 and no error code,
// the failing operation's code and index being only in the multipart reply.
package batch
