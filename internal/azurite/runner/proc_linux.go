//go:build linux

package runner

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts Azurite in its own process group (so stop can kill all of it) and asks
// the kernel to kill it if this process dies without calling Stop.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killProc(cmd *exec.Cmd) error {
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return cmd.Process.Kill()
	}
	return nil
}
