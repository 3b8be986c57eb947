//go:build !unix

package promrun

import "os/exec"

func killProc(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
