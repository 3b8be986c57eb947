//go:build linux

package promrun

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts Prometheus in its own process group and asks the kernel to kill it if
// this process dies without stopping it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
