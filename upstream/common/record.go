package common

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
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

// Modules lists the upstream module versions this binary was built with.
func Modules() string {
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
	path := filepath.Join(dir, name+".txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("%-50s %3d lines\n", path, len(w.lines))
	return nil
}
