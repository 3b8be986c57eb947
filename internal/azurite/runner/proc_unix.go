//go:build unix && !linux

package runner

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts Azurite in its own process group so stop can kill all of it. There is no
// parent-death signal here: a test binary killed without running Stop leaves Azurite running.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func killProc(cmd *exec.Cmd) error {
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return cmd.Process.Kill()
	}
	return nil
}
