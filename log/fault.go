package log

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// A write through a mapping into a page the kernel cannot back (a hole on a full disk, an
// I/O error) raises SIGBUS, which kills a Go program. Reservations make that unlikely;
// these guards turn the rest into errors, for the one goroutine doing the access.

// errFault is what a guarded access returns after a memory fault.
var errFault = fmt.Errorf("memory fault in a mapped file")

// copyGuarded copies src to the start of dst, which lies in a mapping.
func copyGuarded(dst, src []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverFault(&err)
	copy(dst, src)
	return nil
}

// guardFault runs fn, turning a memory fault inside it into an error.
func guardFault(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverFault(&err)
	return fn()
}

func recoverFault(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if re, ok := r.(runtime.Error); ok {
		if f, ok := re.(interface{ Addr() uintptr }); ok {
			*err = storageError("access mapped file", fmt.Errorf("%w at %#x: %v", errFault, f.Addr(), re))
			return
		}
	}
	panic(r)
}
