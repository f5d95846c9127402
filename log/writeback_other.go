//go:build !linux

package log

import "golang.org/x/sys/unix"

// syncFileRangeWrite: sync_file_range(2) is Linux's; elsewhere writeback is left to the
// kernel (Log.maybeWriteback turns itself off on ENOSYS).
func syncFileRangeWrite(fd int, off, n int64) error { return unix.ENOSYS }
