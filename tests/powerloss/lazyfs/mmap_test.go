package lazyfs

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func mapFile(t *testing.T, path string, n int) []byte {
	t.Helper()
	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	m, err := unix.Mmap(int(file.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func msync(t *testing.T, m []byte) {
	t.Helper()
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
}

func unmapFile(t *testing.T, m []byte) {
	t.Helper()
	if err := unix.Munmap(m); err != nil {
		t.Fatal(err)
	}
}
