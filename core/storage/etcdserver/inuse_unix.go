//go:build unix

package etcdserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// checkNotInUse fails when another process has the member's database open: bbolt takes an
// exclusive flock on it and, with no timeout, a second etcd on the same data dir would wait
// for that lock forever, silently (a second `wasmplane up --data-dir D`). The probe lock is
// released at once, before etcd takes its own.
func checkNotInUse(dataDir string) error {
	db := filepath.Join(dataDir, "member", "snap", "db")
	f, err := os.Open(db)
	if errors.Is(err, os.ErrNotExist) {
		return nil // a new member: nothing to share yet
	}
	if err != nil {
		return fmt.Errorf("etcdserver: opening %s: %w", db, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("etcdserver: data dir %s is in use by another process (another wasmplane up or etcd member on the same data dir?)", dataDir)
		}
		return fmt.Errorf("etcdserver: locking %s: %w", db, err)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
