//go:build linux

package proc

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the process in its own process group (so that Stop can kill all of it)
// and asks the kernel to kill it if this process dies without stopping it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
