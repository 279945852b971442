package main

import (
	"os"
	"runtime"
	"syscall"
)

// A foreground `up` asks the kernel for SIGTERM when its parent dies. `go run`
// does not pass SIGTERM on to the program it runs, so without this a SIGTERM
// to `go run ... up` would leave the supervisor, and so the control plane,
// running. The setting belongs to the main thread, on which init runs.
func init() {
	if len(os.Args) < 2 || os.Args[1] != "up" {
		return
	}
	for _, a := range os.Args[2:] {
		switch a {
		case "--detach", "-detach", "--detach=true", "-detach=true", "--supervised", "-supervised", "--supervised=true":
			return
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ppid := os.Getppid()
	syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
	if os.Getppid() != ppid { // the parent died before the request
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
