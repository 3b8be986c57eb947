package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed71701133/tablets/internal/azurite/npm"
	"github.com/seed71701133/tablets/internal/proc"
)

// CacheEnv names the environment variable that overrides the install directory.
const CacheEnv = "TABLETS_AZURITE_CACHE"

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
	done := func() (bool, error) { return installed(dir, hash), nil }
	err = proc.Install(ctx, dir, done, func(tmp string) error { return npmInstall(ctx, dir, tmp, pkg, lock, hash) })
	if err != nil {
		return "", fmt.Errorf("azurite: %w", err)
	}
	return binPath(dir), nil
}

// npmInstall runs `npm ci` in tmp and moves the node_modules it made into dir.
func npmInstall(ctx context.Context, dir, tmp string, pkg, lock []byte, hash string) error {
	if _, err := exec.LookPath("npm"); err != nil {
		return errors.New("npm not found on PATH: install Node.js 20+ with npm")
	}
	if err := checkNodeVersion(ctx); err != nil {
		return err
	}
	for _, d := range []string{dir, tmp} {
		for name, data := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
			if err := os.WriteFile(filepath.Join(d, name), data, 0o644); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		}
	}

	// --ignore-scripts: the only install script in the tree is protobufjs' postinstall
	// (a version notice); Azurite runs without it.
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_loglevel=error")
	out := proc.NewTail(8 << 10)
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("`npm ci` of azurite in %s failed after %s (the first install needs the npm registry): %w\n%s",
			tmp, time.Since(start).Round(time.Second), err, out)
	}
	if _, err := os.Stat(binPath(tmp)); err != nil {
		return fmt.Errorf("`npm ci` succeeded but %s is missing:\n%s", binPath(tmp), out)
	}
	if err := os.WriteFile(filepath.Join(tmp, "node_modules", stampFile), []byte(hash+"\n"), 0o644); err != nil {
		return err
	}
	// Replace a stale or partial install, then move the complete one into place.
	if err := os.RemoveAll(filepath.Join(dir, "node_modules")); err != nil {
		return fmt.Errorf("remove stale install: %w", err)
	}
	if err := os.Rename(filepath.Join(tmp, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		if installed(dir, hash) { // only without flock: a concurrent install won
			return nil
		}
		return err
	}
	return nil
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
