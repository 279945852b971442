package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// A foreground `up` run by `go run` asks the kernel for SIGTERM when the go
// command dies. `go run` does not pass SIGTERM on to the program it runs, so
// without this a SIGTERM to `go run ... up` would leave the supervisor, and so
// the control plane, running. Only under the go command: a shell's `up &`
// keeps its usual meaning. The setting belongs to the main thread, on which
// init runs.
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
	ppid := os.Getppid()
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
	if os.Getppid() != ppid { // the parent died before the request
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
