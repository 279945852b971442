package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The supervisor holds an exclusive flock on supervisor.pid for as long as it
// runs and writes its pid there; so "is one running" never trusts a stale pid.

func takeLock(l *layout) (*os.File, error) {
	f, err := os.OpenFile(l.pidFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		data, _ := io.ReadAll(f)
		f.Close()
		return nil, exitError{1, fmt.Sprintf("up: a control plane is already running (supervisor pid %s); run down first", strings.TrimSpace(string(data)))}
	}
	if err := f.Truncate(0); err != nil {
		return nil, err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return nil, err
	}
	return f, nil
}

// lockHeld reports whether a supervisor holds the lock, and its pid.
func lockHeld(l *layout) (bool, int) {
	f, err := os.Open(l.pidFile)
	if err != nil {
		return false, 0
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false, 0
	}
	data, _ := io.ReadAll(f)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return true, pid
}

func readState(l *layout) (*state, error) {
	data, err := os.ReadFile(l.current)
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

func writeState(l *layout, st *state) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := l.current + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, l.current)
}

// procStartTime is field 22 of /proc/<pid>/stat (0 if there is no such
// process), which with the pid names a process unambiguously.
func procStartTime(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 || f[0] == "Z" {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

func (p *proc) alive() bool {
	return p.Pid > 0 && p.StartTime != 0 && procStartTime(p.Pid) == p.StartTime
}

// reapOrphans kills what a previous supervisor that died without stopping its
// processes left behind (its current.json remains; the caller holds the lock).
func reapOrphans(l *layout, out io.Writer) int {
	st, err := readState(l)
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range st.Processes {
		if p.alive() {
			syscall.Kill(-p.Pid, syscall.SIGKILL)
			fmt.Fprintf(out, "killed %s (pid %d) left by an earlier supervisor\n", p.Name, p.Pid)
			n++
		}
	}
	os.Remove(l.current)
	return n
}

func cmdDown(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	root := fs.String("root", "", "the controlloop repository (default: found above the working directory)")
	dir := fs.String("dir", "", "state directory (default: <root>/target/controlplane)")
	timeout := fs.Duration("timeout", 90*time.Second, "how long to wait for the supervisor to stop everything before killing what is left")
	fs.Parse(args)
	l, err := findLayout(*root, *dir)
	if err != nil {
		return err
	}
	t0 := time.Now()
	st, _ := readState(l)
	held, pid := lockHeld(l)
	if !held && st == nil {
		fmt.Println("down: not running")
		return nil
	}
	if held && pid > 0 {
		syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(*timeout)
		for held && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			held, _ = lockHeld(l)
		}
		if held {
			syscall.Kill(pid, syscall.SIGKILL)
			fmt.Printf("down: supervisor pid %d did not stop in %s; killed it\n", pid, *timeout)
			time.Sleep(200 * time.Millisecond)
		} else {
			fmt.Printf("down: supervisor pid %d stopped everything in %s\n", pid, time.Since(t0).Round(10*time.Millisecond))
		}
	}
	if held, _ := lockHeld(l); held {
		return errors.New("down: the supervisor still holds " + l.pidFile)
	}
	if st != nil {
		for _, p := range st.Processes {
			if p.alive() {
				syscall.Kill(-p.Pid, syscall.SIGKILL)
				fmt.Printf("down: killed leftover %s (pid %d)\n", p.Name, p.Pid)
			}
		}
	}
	os.Remove(l.current)
	fmt.Println("down: not running")
	return nil
}

// ready reports whether a control plane is up and its apiserver answers
// /readyz, with its state.
func ready(l *layout) (*state, error) {
	held, pid := lockHeld(l)
	if !held {
		return nil, errors.New("not running")
	}
	st, err := readState(l)
	if err != nil || !st.Ready {
		return nil, fmt.Errorf("starting (supervisor pid %d)", pid)
	}
	tc, err := adminTLS(l)
	if err != nil {
		return st, err
	}
	if err := checkHTTP(tc, st.Server+"/readyz"); err != nil {
		return st, fmt.Errorf("up, but not ready: %v", err)
	}
	return st, nil
}

func cmdStatus(args []string) error {
	fs := flag.NewFlagSet("status", flag.ExitOnError)
	root := fs.String("root", "", "the controlloop repository (default: found above the working directory)")
	dir := fs.String("dir", "", "state directory (default: <root>/target/controlplane)")
	asJSON := fs.Bool("json", false, "print current.json")
	fs.Parse(args)
	l, err := findLayout(*root, *dir)
	if err != nil {
		return err
	}
	st, err := ready(l)
	if err != nil {
		fmt.Println("status:", err)
		return exitError{3, ""}
	}
	if *asJSON {
		data, _ := os.ReadFile(l.current)
		os.Stdout.Write(data)
		return nil
	}
	fmt.Printf("status: up (Kubernetes %s, etcd %s), supervisor pid %d, since %s\n", st.KubernetesVersion, st.EtcdVersion, st.Supervisor.Pid, st.StartedAt)
	for _, p := range st.Processes {
		fmt.Printf("  %-24s pid %-7d %-28s log %s\n", p.Name, p.Pid, p.URL, p.Log)
	}
	printWhere(st, l)
	return nil
}

func cmdEnv(args []string) error {
	fs := flag.NewFlagSet("env", flag.ExitOnError)
	root := fs.String("root", "", "the controlloop repository (default: found above the working directory)")
	dir := fs.String("dir", "", "state directory (default: <root>/target/controlplane)")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for a control plane to be ready")
	fs.Parse(args)
	l, err := findLayout(*root, *dir)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(*timeout)
	for {
		st, err := ready(l)
		if err == nil {
			q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
			fmt.Printf("export CONTROLLOOP_REAL_KUBECONFIG=%s\n", q(st.Kubeconfig))
			fmt.Printf("export CONTROLLOOP_REAL_SERVER=%s\n", q(st.Server))
			fmt.Printf("export CONTROLLOOP_REAL_CA=%s\n", q(st.CAFile))
			fmt.Printf("export CONTROLLOOP_REAL_KUBECTL=%s\n", q(st.Kubectl))
			if st.ProxyURL != "" {
				fmt.Printf("export CONTROLLOOP_REAL_PROXY=%s\n", q(st.ProxyURL))
			}
			return nil
		}
		if time.Now().After(deadline) {
			return exitError{1, fmt.Sprintf("env: no ready control plane after %s: %v (start one with: up --detach)", *timeout, err)}
		}
		time.Sleep(100 * time.Millisecond)
	}
}
