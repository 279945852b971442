// Package common has what every recorder needs and builds without controller-runtime: the
// recorded file format, the fake cluster's helpers, and the scenarios on client-go alone that
// build on every release (the storms, chapter 05's check, chapter 01's contention, …). The
// controller-runtime scenarios are package cr; the client-go scenarios that need v0.36 or
// newer, package clientgo. It is its own module so that the recorder of each release runs the
// very same code: the module that imports it decides the versions.
package common

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Writer collects one scenario's lines and header notes.
type Writer struct {
	lines []string
	notes []string
}

// Printf adds one recorded line.
func (w *Writer) Printf(format string, args ...any) {
	w.lines = append(w.lines, fmt.Sprintf(format, args...))
}

// Note adds a `# note:` header line (not compared).
func (w *Writer) Note(format string, args ...any) {
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
}

// Lines returns the recorded lines so far.
func (w *Writer) Lines() []string { return w.lines }

// watched are the modules a recording names in its header.
var watched = map[string]bool{
	"k8s.io/client-go": true, "k8s.io/apimachinery": true, "k8s.io/api": true,
	"k8s.io/utils": true, "golang.org/x/time": true, "sigs.k8s.io/controller-runtime": true,
}

// Modules lists the upstream module versions this binary was built with.
func Modules() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var out []string
	for _, d := range info.Deps {
		if watched[d.Path] {
			out = append(out, d.Path+" "+d.Version)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// Version is the version of module path this binary was built with ("" if not linked).
func Version(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range info.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return ""
}

// Minor is "v0.N" for a module version "v0.N.P" or a pre-release of it ("v0.N.P-beta.0").
func Minor(path string) string {
	parts := strings.SplitN(Version(path), ".", 3)
	if len(parts) < 3 {
		return strings.Join(parts, ".")
	}
	return parts[0] + "." + parts[1]
}

// MinorNumber is N of the linked module's "v0.N" (0 if it is not linked).
func MinorNumber(path string) int {
	parts := strings.SplitN(Minor(path), ".", 2)
	if len(parts) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(parts[1])
	return n
}

// ClientGo and ControllerRuntime are the linked versions, e.g. "v0.37.2".
func ClientGo() string          { return Version("k8s.io/client-go") }
func ControllerRuntime() string { return Version("sigs.k8s.io/controller-runtime") }

// ClientGoPrefix and ControllerRuntimePrefix start the names of the files a release writes:
// "client_go_v0.37_", "controller_runtime_v0.25_".
func ClientGoPrefix() string { return "client_go_" + Minor("k8s.io/client-go") + "_" }
func ControllerRuntimePrefix() string {
	return "controller_runtime_" + Minor("sigs.k8s.io/controller-runtime") + "_"
}

// Save writes dir/name.txt: the header (scenario, how, modules, Go version, date, notes),
// then the lines. tests/recorded_upstream/ skips the lines that start with "# ".
func (w *Writer) Save(dir, name, how string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# scenario: %s\n", name)
	fmt.Fprintf(&b, "# recorded: %s\n", how)
	fmt.Fprintf(&b, "# modules: %s\n", Modules())
	fmt.Fprintf(&b, "# go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "# date: %s\n", time.Now().UTC().Format("2006-01-02"))
	for _, n := range w.notes {
		fmt.Fprintf(&b, "# note: %s\n", n)
	}
	for _, l := range w.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return os.WriteFile(filepath.Join(dir, name+".txt"), []byte(b.String()), 0o644)
}

// Scenario is one recorded file: Run prints its lines through w. A scenario that needs Go's
// virtual clock runs its body in synctest.Test(t, …) itself.
type Scenario struct {
	Name string
	// How says how the lines were obtained, for the header.
	How string
	Run func(t *testing.T, w *Writer)
}

// Out is the directory a recorder writes into; empty: run the scenarios, write nothing.
var Out = flag.String("out", "", "directory for the recorded files (empty: run, write nothing)")

// Record runs each scenario as a subtest of t (select with -run 'TestRecord/NAME') and, with
// -out, writes its file there.
func Record(t *testing.T, scenarios []Scenario) {
	if *Out != "" {
		if err := os.MkdirAll(*Out, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, s := range scenarios {
		if seen[s.Name] {
			t.Fatalf("two scenarios named %s", s.Name)
		}
		seen[s.Name] = true
		t.Run(s.Name, func(t *testing.T) {
			w := &Writer{}
			s.Run(t, w)
			if t.Failed() || *Out == "" {
				return
			}
			if err := w.Save(*Out, s.Name, s.How); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d lines", filepath.Join(*Out, s.Name+".txt"), len(w.lines))
		})
	}
}

// Bubble runs f in a synctest bubble (testing/synctest.Test), then lets one virtual second
// pass before the bubble ends: client-go v0.34's queues stop their metrics ticker only at its
// next tick after ShutDown, and a bubble must not end with a goroutine still waiting.
func Bubble(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, func(t *testing.T) {
		f(t)
		time.Sleep(time.Second)
	})
}

// Printf receives one recorded line.
type Printf func(format string, args ...any)

// Must panics on an error: a scenario that cannot set itself up has nothing to record.
func Must(err error) {
	if err != nil {
		panic(err)
	}
}

// Pad3 is i (0..999) in three digits.
func Pad3(i int) string {
	return string([]byte{byte('0' + i/100), byte('0' + i/10%10), byte('0' + i%10)})
}

// Run starts run(ctx) on a goroutine of its own; stop cancels ctx and waits for run to return.
func Run(run func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
