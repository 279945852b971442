// Command record runs the book's scenarios on the real client-go and controller-runtime and
// rewrites recorded/*.txt, one file per scenario, in the plain text format that
// tests/recorded_upstream/ renders the port's runs in.
//
// Usage, from upstream/: go run ./record [-out recorded] [-only NAME]
package main

import (
	"flag"
	"os"

	"controlloop/upstream/common"
)

// A scenario writes its body lines through w and may add header notes.
type scenario struct {
	name string
	// how says how the lines were obtained, for the header.
	how string
	run func(w *writer)
}

// writer adapts common.Writer to the scenarios' lower-case calls.
type writer struct{ common.Writer }

func (w *writer) printf(format string, args ...any) { w.Printf(format, args...) }
func (w *writer) note(format string, args ...any)   { w.Note(format, args...) }

var scenarios []scenario

func register(name, how string, run func(w *writer)) {
	scenarios = append(scenarios, scenario{name, how, run})
}

func main() {
	out := flag.String("out", "recorded", "directory for the recorded files")
	only := flag.String("only", "", "record only the scenario with this name")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		panic(err)
	}
	for _, s := range scenarios {
		if *only != "" && s.name != *only {
			continue
		}
		w := &writer{}
		s.run(w)
		if err := w.Save(*out, s.name, s.how); err != nil {
			panic(err)
		}
	}
}
