// Command record runs the book's scenarios on the real client-go and controller-runtime and
// rewrites recorded/*.txt, one file per scenario, in the plain text format that
// tests/recorded_upstream.rs renders the port's runs in.
//
// Usage, from upstream/: go run ./record [-out recorded]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// A scenario writes its body lines through w and may add header notes.
type scenario struct {
	name string
	// how says how the lines were obtained, for the header.
	how string
	run func(w *writer)
}

type writer struct {
	lines []string
	notes []string
}

func (w *writer) printf(format string, args ...any) {
	w.lines = append(w.lines, fmt.Sprintf(format, args...))
}

func (w *writer) note(format string, args ...any) {
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
}

var scenarios []scenario

func register(name, how string, run func(w *writer)) {
	scenarios = append(scenarios, scenario{name, how, run})
}

// modules lists the versions of the upstream modules this binary was built with.
func modules() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	want := map[string]bool{
		"k8s.io/client-go": true, "k8s.io/apimachinery": true, "k8s.io/api": true,
		"k8s.io/utils": true, "golang.org/x/time": true, "sigs.k8s.io/controller-runtime": true,
	}
	var out []string
	for _, d := range info.Deps {
		if want[d.Path] {
			out = append(out, d.Path+" "+d.Version)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func main() {
	out := flag.String("out", "recorded", "directory for the recorded files")
	only := flag.String("only", "", "record only the scenario with this name")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		panic(err)
	}
	mods := modules()
	date := time.Now().UTC().Format("2006-01-02")
	for _, s := range scenarios {
		if *only != "" && s.name != *only {
			continue
		}
		w := &writer{}
		s.run(w)
		var b strings.Builder
		fmt.Fprintf(&b, "# scenario: %s\n", s.name)
		fmt.Fprintf(&b, "# recorded: %s\n", s.how)
		fmt.Fprintf(&b, "# modules: %s\n", mods)
		fmt.Fprintf(&b, "# go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		fmt.Fprintf(&b, "# date: %s\n", date)
		for _, n := range w.notes {
			fmt.Fprintf(&b, "# note: %s\n", n)
		}
		for _, l := range w.lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
		path := filepath.Join(*out, s.name+".txt")
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			panic(err)
		}
		fmt.Printf("%-40s %3d lines\n", path, len(w.lines))
	}
}
