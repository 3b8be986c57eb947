// Command promrun-install installs the pinned Prometheus (Debian's prometheus 2.42 package,
// downloaded with apt-get download and unpacked with dpkg -x into the user cache, or into
// $TABLETS_PROMETHEUS_DIR) and prints the directory it is in (the one holding
// usr/bin/prometheus). CI runs it once before the tests, so that parallel test binaries do
// not wait on each other's install. It installs Debian's Alertmanager (0.25) the same way.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/seed71701133/tablets/internal/testkit/promrun"
)

func main() {
	verbose := flag.Bool("v", false, "also print the binaries, the version and the time taken to stderr")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	b, err := promrun.Install(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promrun-install:", err)
		os.Exit(1)
	}
	if *verbose {
		fmt.Fprintf(os.Stderr, "prometheus %s: %s, %s (%s)\n", b.Version, b.Prometheus, b.Promtool, time.Since(start).Round(time.Millisecond))
	}
	am, err := promrun.InstallAlertmanager(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promrun-install:", err)
		os.Exit(1)
	}
	if *verbose {
		fmt.Fprintf(os.Stderr, "alertmanager: %s\n", am)
	}
	fmt.Println(b.Dir)
}
