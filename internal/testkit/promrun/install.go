package promrun

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/seed71701133/tablets/internal/proc"
)

// DirEnv names the environment variable that overrides the install directory: a directory
// holding usr/bin/prometheus and usr/bin/promtool as unpacked by `dpkg -x` (or "/" to use a
// system-wide install of Debian's package). If the binaries are missing there, [Install]
// installs them there.
const DirEnv = "TABLETS_PROMETHEUS_DIR"

// VersionPrefix pins the Prometheus release: the Debian package version that [Install]
// downloads, and the version `prometheus --version` reports, must start with it. Debian 12
// (bookworm) ships 2.42.0+ds-5+b6.
const VersionPrefix = "2.42."

// Package is the Debian package [Install] downloads.
const Package = "prometheus"

// stampFile, in the install directory, marks it as installed by [Install] and records the
// Debian package version; only a directory with this file is ever cleaned up or replaced.
const stampFile = ".tablets-promrun"

// Binaries is an installed Prometheus release.
type Binaries struct {
	// Dir is the root the package was unpacked into (it holds usr/bin/prometheus).
	Dir string
	// Prometheus and Promtool are the executables' paths.
	Prometheus, Promtool string
	// Version is the version `prometheus --version` reports, e.g. "2.42.0+ds".
	Version string
}

// WebAssets returns the directory of the web UI's templates and static files
// (--web.local-assets; Debian's build serves them from files, not from the binary).
func (b *Binaries) WebAssets() string {
	return filepath.Join(b.Dir, "usr", "share", "prometheus", "web")
}

// ConsoleTemplates and ConsoleLibraries return the directories for --web.console.templates
// and --web.console.libraries (Debian's package installs them empty, with a README, under
// /etc/prometheus).
func (b *Binaries) ConsoleTemplates() string {
	return filepath.Join(b.Dir, "etc", "prometheus", "consoles")
}

// ConsoleLibraries: see [Binaries.ConsoleTemplates].
func (b *Binaries) ConsoleLibraries() string {
	return filepath.Join(b.Dir, "etc", "prometheus", "console_libraries")
}

// CacheDir returns the directory Prometheus is (or will be) installed in: $TABLETS_PROMETHEUS_DIR
// if set, else os.UserCacheDir()/tablets/prometheus-2.42.
func CacheDir() (string, error) {
	if d := os.Getenv(DirEnv); d != "" {
		return filepath.Abs(d)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("promrun: no cache directory (set $%s): %w", DirEnv, err)
	}
	return filepath.Join(base, "tablets", "prometheus-"+strings.TrimSuffix(VersionPrefix, ".")), nil
}

var (
	installMu sync.Mutex
	verified  = map[string]*Binaries{} // install directory -> checked binaries
)

// Install makes sure the pinned Prometheus (see [VersionPrefix]) is installed in [CacheDir] and
// returns its binaries. If they are missing it downloads Debian's package with
// `apt-get download prometheus=<version>` (no root needed, but apt's package lists must be
// present: `apt-get update`) and unpacks it with `dpkg -x`. It is safe to call from several
// processes at once: an exclusive file lock serializes installs, and the package is unpacked
// into a temporary directory whose contents are moved into place when complete (usr/, which
// holds the binaries, last). A directory whose binaries report another version is replaced
// only if Install made it; otherwise Install fails.
func Install(ctx context.Context) (*Binaries, error) {
	dir, err := CacheDir()
	if err != nil {
		return nil, err
	}
	installMu.Lock()
	defer installMu.Unlock()
	if b := verified[dir]; b != nil {
		return b, nil
	}
	b, err := install(ctx, dir)
	if err != nil {
		return nil, err
	}
	verified[dir] = b
	return b, nil
}

// errMissing means the install directory has no binaries.
var errMissing = errors.New("not installed")

// check returns the binaries installed in dir, errMissing if there are none, or another error
// if they do not work or are not the pinned version.
func check(ctx context.Context, dir string) (*Binaries, error) {
	b := &Binaries{
		Dir:        dir,
		Prometheus: filepath.Join(dir, "usr", "bin", "prometheus"),
		Promtool:   filepath.Join(dir, "usr", "bin", "promtool"),
	}
	for _, p := range []string{b.Prometheus, b.Promtool} {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			return nil, errMissing
		} else if err != nil {
			return nil, err
		}
	}
	for _, p := range []string{b.Prometheus, b.Promtool} {
		v, err := binaryVersion(ctx, p)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(v, VersionPrefix) {
			return nil, fmt.Errorf("%s is version %s, want %s*", p, v, VersionPrefix)
		}
		if b.Version == "" {
			b.Version = v
		}
	}
	return b, nil
}

var versionRE = regexp.MustCompile(`(?m)^\S+, version (\S+)`)

// binaryVersion runs `bin --version` and returns the version it reports ("2.42.0+ds").
func binaryVersion(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("`%s --version` failed: %w\n%s", bin, err, out)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("cannot parse `%s --version` output:\n%s", bin, out)
	}
	return string(m[1]), nil
}

func install(ctx context.Context, dir string) (*Binaries, error) {
	var b *Binaries
	done := func() (bool, error) {
		var err error
		if b, err = check(ctx, dir); err == nil {
			return true, nil
		}
		if !errors.Is(err, errMissing) && !managed(dir) {
			return false, fmt.Errorf("%v (and %s was not installed by promrun, so it is left alone: fix or unset $%s)", err, dir, DirEnv)
		}
		return false, checkForeign(dir)
	}
	if err := proc.Install(ctx, dir, done, func(tmp string) error { return unpack(ctx, dir, tmp) }); err != nil {
		return nil, fmt.Errorf("promrun: %w", err)
	}
	return b, nil
}

// unpack downloads the package into tmp, unpacks it there and moves it into dir.
func unpack(ctx context.Context, dir, tmp string) error {
	for _, tool := range []string{"apt-cache", "apt-get", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found on PATH: installing Prometheus needs Debian's apt and dpkg; elsewhere, unpack Debian's prometheus_%s* package (`dpkg -x prometheus_*.deb DIR`) and set $%s=DIR",
				tool, VersionPrefix, DirEnv)
		}
	}
	start := time.Now()
	version, err := pickVersion(ctx)
	if err != nil {
		return err
	}
	args := []string{"download", Package + "=" + version}
	if os.Geteuid() == 0 {
		// As root, apt downloads as user _apt, who cannot write to our 0700 temporary
		// directory; it then falls back to root with a warning. Skip the attempt.
		args = append([]string{"-o", "APT::Sandbox::User=root"}, args...)
	}
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("`apt-get %s` failed after %s (it needs the Debian mirror; if it cannot locate the package, run `apt-get update` as root): %w\n%s",
			strings.Join(args, " "), time.Since(start).Round(time.Millisecond), ctxErr(ctx, err), out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, Package+"_*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("`apt-get download` left %d %s_*.deb files in %s, want 1", len(debs), Package, tmp)
	}
	root := filepath.Join(tmp, "root")
	if out, err := exec.CommandContext(ctx, "dpkg", "-x", debs[0], root).CombinedOutput(); err != nil {
		return fmt.Errorf("`dpkg -x %s %s` failed: %w\n%s", debs[0], root, ctxErr(ctx, err), out)
	}
	if _, err := check(ctx, root); err != nil {
		return fmt.Errorf("unpacked %s but: %w", filepath.Base(debs[0]), err)
	}
	if err := os.WriteFile(filepath.Join(dir, stampFile), []byte(version+"\n"), 0o644); err != nil {
		return err
	}
	return moveInto(dir, root)
}

// moveInto replaces dir's install with root's entries: usr/ (the binaries) is removed first
// and moved last, so that an interrupted install never looks complete.
func moveInto(dir, root string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Name() != "usr" {
			names = append(names, e.Name())
		}
	}
	names = append(names, "usr")
	if err := os.RemoveAll(filepath.Join(dir, "usr")); err != nil {
		return fmt.Errorf("remove stale install: %w", err)
	}
	for _, name := range names {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("remove stale install: %w", err)
		}
		if err := os.Rename(filepath.Join(root, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// checkForeign returns an error if dir holds a usr/ or etc/ that promrun did not install: we
// never delete what we did not make (with $TABLETS_PROMETHEUS_DIR=/, usr/ is the system's).
func checkForeign(dir string) error {
	if managed(dir) {
		return nil
	}
	for _, name := range []string{"usr", "etc"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%s has no working prometheus but already has %s/, not installed by promrun: refusing to install there (fix or unset $%s)",
				dir, name, DirEnv)
		}
	}
	return nil
}

// managed reports whether dir was installed by promrun.
func managed(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, stampFile))
	return err == nil
}

// pickVersion returns the newest version of the package that apt knows and that starts with
// VersionPrefix (apt-cache madison lists the newest first).
func pickVersion(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "madison", Package).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("`apt-cache madison %s` failed: %w\n%s", Package, ctxErr(ctx, err), out)
	}
	var all []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) < 3 || strings.TrimSpace(f[0]) != Package {
			continue
		}
		v := strings.TrimSpace(f[1])
		if strings.HasPrefix(v, VersionPrefix) {
			return v, nil
		}
		all = append(all, v)
	}
	if len(all) == 0 {
		return "", fmt.Errorf("apt knows no %s package (its package lists are missing or stale): run `apt-get update` as root (Debian 12 bookworm's main has %s 2.42.0+ds-5+b6), or set $%s to a directory where Debian's prometheus_%s* package was unpacked with `dpkg -x`",
			Package, Package, DirEnv, VersionPrefix)
	}
	return "", fmt.Errorf("apt offers %s %s but not %s*: add a Debian 12 (bookworm) source, or set $%s to a directory where Debian's prometheus_%s* package was unpacked with `dpkg -x`",
		Package, strings.Join(all, ", "), VersionPrefix, DirEnv, VersionPrefix)
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}
