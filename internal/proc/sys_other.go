//go:build !unix

package proc

import (
	"errors"
	"os/exec"
)

func setProcAttr(cmd *exec.Cmd) {}

// terminate fails: there is no SIGTERM here, so Stop kills at once.
func terminate(cmd *exec.Cmd) error { return errors.New("no SIGTERM on this system") }

func killGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }
