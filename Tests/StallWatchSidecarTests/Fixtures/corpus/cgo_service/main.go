// A Go service whose loop calls into C through cgo, for the sidecar's corpus. Built by the test with `go build`.
// Its loop goroutine is locked to the main thread and idles in epoll_wait (a raw system call with a 100 ms
// timeout, on that thread); on the tenth tick it calls the C function the mode names, which blocks on the C
// side while the goroutine's own frames wait on the goroutine stack. Then it idles again and exits 0.
//
// usage: cgo_service MODE [STALL_MS]   (MODE: idle, mutex, sleep, pipe; prints READY once the loop runs)
package main

/*
#cgo CFLAGS: -O2 -g
#include "service.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

func init() {
	// The main goroutine stays on the main thread (the thread the sidecar watches by default).
	runtime.LockOSThread()
}

// stallInC makes the one cgo call of the stalled tick: its frame, and its callers', are on the goroutine stack.
//
//go:noinline
func stallInC(mode string, ms int) {
	switch mode {
	case "mutex":
		C.cgo_service_lock_held_mutex(C.int(ms))
	case "sleep":
		C.cgo_service_sleep(C.int(ms))
	case "pipe":
		C.cgo_service_read_pipe(C.int(ms))
	}
}

//go:noinline
func handleTick(tick int, mode string, ms int) {
	if tick == 10 && mode != "idle" {
		stallInC(mode, ms)
	}
}

func main() {
	mode := "idle"
	ms := 1000
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	if len(os.Args) > 2 {
		ms, _ = strconv.Atoi(os.Args[2])
	}
	ep, err := syscall.EpollCreate1(0)
	if err != nil {
		os.Exit(3)
	}
	events := make([]syscall.EpollEvent, 8)
	fmt.Println("READY")
	for tick := 1; tick <= 30; tick++ {
		// Nothing is ever ready: each wait is one 100 ms tick of the loop.
		if _, err := syscall.EpollWait(ep, events, 100); err != nil && err != syscall.EINTR {
			os.Exit(4)
		}
		handleTick(tick, mode, ms)
	}
}
