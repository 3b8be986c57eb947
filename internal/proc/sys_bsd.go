//go:build unix && !linux

package proc

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the process in its own process group (so that Stop can kill all of it).
// There is no parent-death signal here: a test binary killed without stopping the process
// leaves it running.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
