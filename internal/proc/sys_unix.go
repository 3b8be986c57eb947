//go:build unix

package proc

import (
	"os/exec"
	"syscall"
)

// terminate asks the process to exit (SIGTERM).
func terminate(cmd *exec.Cmd) error { return cmd.Process.Signal(syscall.SIGTERM) }

// killGroup sends SIGKILL to the process group of cmd, else to the process.
func killGroup(cmd *exec.Cmd) error {
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return cmd.Process.Kill()
	}
	return nil
}
