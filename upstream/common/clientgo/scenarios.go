// Package clientgo has the scenarios that run client-go alone (its workqueue, rate limiters,
// FIFOs, fake clientset, informer, leader election and feature table). It needs client-go
// v0.36 or newer, so only the recorders of the main module (client-go v0.37), of v024/
// (client-go v0.36) and of v038/ (client-go v0.38) import it; each writes the files under its
// own names. A scenario registered with a first minor runs only on that client-go or newer.
package clientgo

import (
	"strings"
	"testing"

	"controlloop/upstream/common"
)

// writer adapts common.Writer to the scenarios' lower-case calls.
type writer struct{ *common.Writer }

func (w writer) printf(format string, args ...any) { w.Printf(format, args...) }
func (w writer) note(format string, args ...any)   { w.Note(format, args...) }

type scenario struct {
	name, how string
	// since is the first client-go minor the scenario is recorded on (0: every one).
	since int
	run   func(t *testing.T, w *writer)
}

var scenarios []scenario

func register(name, how string, run func(t *testing.T, w *writer)) {
	registerSince(0, name, how, run)
}

// registerSince registers a scenario recorded on client-go v0.<minor> and newer.
func registerSince(minor int, name, how string, run func(t *testing.T, w *writer)) {
	scenarios = append(scenarios, scenario{name, how, minor, run})
}

// Scenarios are the client-go scenarios, their files named prefix+name; "{client-go}" in a
// header is the linked client-go version. feature_gates_by_release is not among them (ByRelease).
func Scenarios(prefix string) []common.Scenario {
	var out []common.Scenario
	linked := common.MinorNumber("k8s.io/client-go")
	for _, s := range scenarios {
		if s.name == byRelease || linked < s.since {
			continue
		}
		out = append(out, wrap(prefix, s))
	}
	return out
}

// ByRelease is feature_gates_by_release: it parses downloaded releases, so the linked
// version does not matter and one recorder writes it.
func ByRelease() common.Scenario {
	for _, s := range scenarios {
		if s.name == byRelease {
			return wrap("", s)
		}
	}
	panic("no " + byRelease)
}

const byRelease = "feature_gates_by_release"

func wrap(prefix string, s scenario) common.Scenario {
	run := s.run
	return common.Scenario{
		Name: prefix + s.name,
		How:  strings.ReplaceAll(s.how, "{client-go}", "client-go "+common.ClientGo()),
		Run:  func(t *testing.T, w *common.Writer) { run(t, &writer{w}) },
	}
}
