package proc

import (
	"errors"
	"fmt"
	"net"
)

// ErrPortInUse is wrapped by the error of a start that failed because another process took
// the port: [OnFreePort] then tries another one.
var ErrPortInUse = errors.New("port in use")

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago. Another process may
// take it before the caller listens on it: see [OnFreePort].
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// OnFreePort calls start with a free port of 127.0.0.1, and again with another port while
// start fails with an error wrapping [ErrPortInUse], at most attempts times in all. It
// returns start's last result.
func OnFreePort[T any](attempts int, start func(port int) (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		var zero T
		port, err := FreePort()
		if err != nil {
			return zero, fmt.Errorf("find a free port: %w", err)
		}
		v, err := start(port)
		if err == nil || !errors.Is(err, ErrPortInUse) || attempt >= attempts {
			return v, err
		}
	}
}
