//go:build !unix

package azurite

import "os/exec"

func setProcAttr(cmd *exec.Cmd) {}

func killProc(cmd *exec.Cmd) error { return cmd.Process.Kill() }
