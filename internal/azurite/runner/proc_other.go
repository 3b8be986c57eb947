//go:build !unix

package runner

import "os/exec"

func setProcAttr(cmd *exec.Cmd) {}

func killProc(cmd *exec.Cmd) error { return cmd.Process.Kill() }
