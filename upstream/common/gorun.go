package common

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// GoRun is the body of a recorder's `go run`: it runs the recorder package pkg's TestRecord
// with `go test` (synctest needs a *testing.T), with -out made absolute and -only NAME turned
// into -run TestRecord/^NAME$.
func GoRun(pkg, defaultOut string) {
	only := flag.String("only", "", "record only the scenario with this name")
	flag.Parse()
	out := *Out
	if out == "" {
		out = defaultOut
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		panic(err)
	}
	run := "^TestRecord$"
	if *only != "" {
		run += "/^" + *only + "$"
	}
	cmd := exec.Command("go", "test", "-count=1", "-v", "-run", run, pkg, "-args", "-out", abs)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
