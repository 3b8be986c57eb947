// Command azurite-install installs the pinned Azurite (npm ci from the repository's lockfile
// into the user cache) and prints where azurite-table is. CI runs it once before the tests,
// so that parallel test binaries do not wait on each other's install.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/seed71701133/tablets/internal/azurite/runner"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := runner.Install(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "azurite-install:", err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
