package runner

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// MinNodeMajor is the oldest Node.js major version the runner accepts. Azurite 3.37.0
// declares node >=22 in its package.json but runs on Node.js 20 (measured).
const MinNodeMajor = 20

var nodeVersionRE = regexp.MustCompile(`^v?(\d+)\.`)

func checkNodeVersion(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "node", "--version").Output()
	if err != nil {
		return fmt.Errorf("`node --version` failed: %w", err)
	}
	v := strings.TrimSpace(string(out))
	m := nodeVersionRE.FindStringSubmatch(v)
	if m == nil {
		return fmt.Errorf("cannot parse `node --version` output %q", v)
	}
	if major, _ := strconv.Atoi(m[1]); major < MinNodeMajor {
		return fmt.Errorf("Node.js %s found on PATH, need %d+", v, MinNodeMajor)
	}
	return nil
}
