package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed71701133/tablets/internal/azurite/npm"
)

// CacheEnv names the environment variable that overrides the install directory.
const CacheEnv = "TABLETS_AZURITE_CACHE"

// MinNodeMajor is the oldest Node.js major version the runner accepts. Azurite 3.37.0
// declares node >=22 in its package.json but runs on Node.js 20 (measured).
const MinNodeMajor = 20

// stampFile, inside node_modules, records the sha256 of the lockfile it was installed from,
// so that a cache directory reused through $TABLETS_AZURITE_CACHE is reinstalled when the
// pinned version changes.
const stampFile = ".tablets-lockfile-sha256"

// lockfile returns the pinned package.json and package-lock.json (package npm embeds them
// from internal/azurite/npm).
func lockfile() ([]byte, []byte, error) {
	if len(npm.PackageJSON) == 0 || len(npm.PackageLock) == 0 {
		return nil, nil, errors.New("empty package.json or package-lock.json")
	}
	return npm.PackageJSON, npm.PackageLock, nil
}

func lockHash(lock []byte) string {
	sum := sha256.Sum256(lock)
	return hex.EncodeToString(sum[:])
}

// CacheDir returns the directory Azurite is (or will be) installed in:
// $TABLETS_AZURITE_CACHE if set, else os.UserCacheDir()/tablets/azurite-<first 12 hex
// digits of the sha256 of the embedded package-lock.json>.
func CacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return filepath.Abs(d)
	}
	_, lock, err := lockfile()
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("azurite: no cache directory (set $%s): %w", CacheEnv, err)
	}
	return filepath.Join(base, "tablets", "azurite-"+lockHash(lock)[:12]), nil
}

// Install makes sure the pinned Azurite is installed in [CacheDir] and returns the path of
// its azurite-table executable. It runs `npm ci` only when the executable is missing or was
// installed from another lockfile. It is safe to call from several processes at once: an
// exclusive file lock serializes installs, and npm installs into a temporary directory that
// is renamed into place when complete.
func Install(ctx context.Context) (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", errors.New("azurite: node not found on PATH: install Node.js 20+ (with npm)")
	}
	pkg, lock, err := lockfile()
	if err != nil {
		return "", fmt.Errorf("azurite: embedded npm files: %w", err)
	}
	hash := lockHash(lock)
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	bin := binPath(dir)
	if installed(dir, hash) {
		return bin, nil
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("azurite: create cache directory: %w", err)
	}
	unlock, err := lockDir(ctx, filepath.Join(dir, ".lock"))
	if err != nil {
		return "", fmt.Errorf("azurite: lock %s: %w", dir, err)
	}
	defer unlock()
	if installed(dir, hash) { // another process installed it while we waited
		return bin, nil
	}

	if _, err := exec.LookPath("npm"); err != nil {
		return "", errors.New("azurite: npm not found on PATH: install Node.js 20+ with npm")
	}
	if err := checkNodeVersion(ctx); err != nil {
		return "", err
	}
	// Leftovers of an interrupted install (safe to remove: we hold the lock).
	if old, _ := filepath.Glob(filepath.Join(dir, "install-*")); len(old) > 0 {
		for _, o := range old {
			_ = os.RemoveAll(o)
		}
	}
	for name, data := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", fmt.Errorf("azurite: write %s: %w", name, err)
		}
	}
	tmp, err := os.MkdirTemp(dir, "install-")
	if err != nil {
		return "", fmt.Errorf("azurite: %w", err)
	}
	defer os.RemoveAll(tmp)
	for name, data := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return "", fmt.Errorf("azurite: write %s: %w", name, err)
		}
	}

	// --ignore-scripts: the only install script in the tree is protobufjs' postinstall
	// (a version notice); Azurite runs without it.
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_loglevel=error")
	var out tailBuffer
	out.max = 8 << 10
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return "", fmt.Errorf("azurite: `npm ci` of azurite in %s failed after %s (the first install needs the npm registry): %w\n%s",
			tmp, time.Since(start).Round(time.Second), err, out.String())
	}
	if _, err := os.Stat(binPath(tmp)); err != nil {
		return "", fmt.Errorf("azurite: `npm ci` succeeded but %s is missing:\n%s", binPath(tmp), out.String())
	}
	if err := os.WriteFile(filepath.Join(tmp, "node_modules", stampFile), []byte(hash+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("azurite: %w", err)
	}
	// Replace a stale or partial install, then move the complete one into place.
	if err := os.RemoveAll(filepath.Join(dir, "node_modules")); err != nil {
		return "", fmt.Errorf("azurite: remove stale install: %w", err)
	}
	if err := os.Rename(filepath.Join(tmp, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		if installed(dir, hash) { // only without flock: a concurrent install won
			return bin, nil
		}
		return "", fmt.Errorf("azurite: %w", err)
	}
	if !installed(dir, hash) {
		return "", fmt.Errorf("azurite: install in %s incomplete", dir)
	}
	return bin, nil
}

func binPath(dir string) string {
	return filepath.Join(dir, "node_modules", ".bin", "azurite-table")
}

func installed(dir, hash string) bool {
	if _, err := os.Stat(binPath(dir)); err != nil {
		return false
	}
	stamp, err := os.ReadFile(filepath.Join(dir, "node_modules", stampFile))
	return err == nil && strings.TrimSpace(string(stamp)) == hash
}

var nodeVersionRE = regexp.MustCompile(`^v?(\d+)\.`)

func checkNodeVersion(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "node", "--version").Output()
	if err != nil {
		return fmt.Errorf("azurite: `node --version` failed: %w", err)
	}
	v := strings.TrimSpace(string(out))
	m := nodeVersionRE.FindStringSubmatch(v)
	if m == nil {
		return fmt.Errorf("azurite: cannot parse `node --version` output %q", v)
	}
	if major, _ := strconv.Atoi(m[1]); major < MinNodeMajor {
		return fmt.Errorf("azurite: Node.js %s found on PATH, need %d+", v, MinNodeMajor)
	}
	return nil
}

// lockDir takes an exclusive lock on path, polling so that ctx can cancel the wait.
func lockDir(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, err
		}
		if ok {
			return func() { unlockFile(f); f.Close() }, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another process's install: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tailBuffer is an io.Writer that keeps the last max bytes written (all of them if max is 0).
// It is safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if b.max > 0 && b.buf.Len() > 2*b.max {
		keep := b.buf.Bytes()[b.buf.Len()-b.max:]
		nb := make([]byte, len(keep), 2*b.max)
		copy(nb, keep)
		b.buf = *bytes.NewBuffer(nb)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.Bytes()
	if b.max > 0 && len(s) > b.max {
		return "..." + string(s[len(s)-b.max:])
	}
	return string(s)
}
