package log

import "golang.org/x/sys/unix"

// syncFileRangeWrite starts writeback of the dirty pages of [off, off+n) without waiting
// for it (sync_file_range(2) with SYNC_FILE_RANGE_WRITE only). It makes nothing durable:
// no metadata, no disk cache flush.
func syncFileRangeWrite(fd int, off, n int64) error {
	for {
		err := unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE)
		if err != unix.EINTR {
			return err
		}
	}
}
