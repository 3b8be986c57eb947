//go:build !linux

package promrun

import "os/exec"

// setProcAttr does nothing here: a test binary killed without stopping Prometheus leaves it
// running (only Linux has a parent-death signal).
func setProcAttr(cmd *exec.Cmd) {}
