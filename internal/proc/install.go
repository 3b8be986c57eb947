package proc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// tmpPattern names the temporary directories of [Install] inside the install directory.
const tmpPattern = "install-*"

// Install makes sure something is installed in dir, once, whatever the number of processes
// asking at the same time (go test ./... runs several test binaries at once).
//
// installed reports whether the install is complete; an error ends Install. It is called
// first without the lock, then again once dir/.lock is held: another process may have
// installed meanwhile. Only then is install called, with tmp, a fresh directory inside dir
// (removed afterwards): it builds the install there and moves it into place so that an
// interrupted install never looks complete. Temporary directories left by interrupted
// installs are removed first. installed must report true after install succeeds.
func Install(ctx context.Context, dir string, installed func() (bool, error), install func(tmp string) error) error {
	if ok, err := installed(); ok || err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create install directory: %w", err)
	}
	unlock, err := Lock(ctx, filepath.Join(dir, ".lock"))
	if err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	defer unlock()
	if ok, err := installed(); ok || err != nil {
		return err
	}
	// Safe to remove: we hold the lock, so no install is using them.
	old, _ := filepath.Glob(filepath.Join(dir, tmpPattern))
	for _, o := range old {
		_ = os.RemoveAll(o)
	}
	tmp, err := os.MkdirTemp(dir, tmpPattern)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := install(tmp); err != nil {
		return err
	}
	ok, err := installed()
	if err != nil {
		return fmt.Errorf("install in %s incomplete: %w", dir, err)
	}
	if !ok {
		return fmt.Errorf("install in %s incomplete", dir)
	}
	return nil
}
