// Package sentinel holds tsdb's error sentinels, so that the parts below package tsdb can
// wrap them: package tsdb gives them their public names (tsdb.ErrExpired = ErrExpired, ...),
// and errors.Is finds either.
package sentinel

import "errors"

// ErrExpired is wrapped by the error of a Write holding a point older than the raw
// retention, or in a period whose table was dropped. Such a Write sends nothing.
var ErrExpired = errors.New("tsdb: point expired")

// ErrFoldBusy is returned by Fold when another process is folding the database.
var ErrFoldBusy = errors.New("tsdb: another process is folding")

// ErrTaskBusy is returned by Exclusive when another process is running the task.
var ErrTaskBusy = errors.New("tsdb: another process is running the task")
