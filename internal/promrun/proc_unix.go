//go:build unix

package promrun

import (
	"os/exec"
	"syscall"
)

// killProc sends SIGKILL to the process group of cmd (Linux starts Prometheus in its own),
// else to the process.
func killProc(cmd *exec.Cmd) {
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		_ = cmd.Process.Kill()
	}
}
