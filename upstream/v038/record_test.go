package main

import (
	"testing"

	"controlloop/upstream/common"
	"controlloop/upstream/common/clientgo"
)

// noControllerRuntime is the note every file of this recorder carries.
const noControllerRuntime = "client-go v0.38 alone: no controller-runtime release built on client-go v0.38 is served by the module proxy yet (the newest, v0.25.3, is built on v0.37), so no controller-runtime scenario is recorded on v0.38"

// TestRecord runs every client-go scenario the main module records, on client-go
// v0.38.0-beta.0, under client_go_v0.38_*, then what v0.38 adds (since038_test.go). No
// controller-runtime is linked: chapter 05's check leaves controller-runtime's predicate out
// (its file says so), and no controller_runtime_* file is written.
func TestRecord(t *testing.T) {
	var all []common.Scenario
	all = append(all, clientgo.Scenarios(common.ClientGoPrefix())...)
	all = append(all, common.ClientGoScenarios(nil)...)
	all = append(all, since038()...)
	for i := range all {
		run := all[i].Run
		all[i].Run = func(t *testing.T, w *common.Writer) {
			w.Note(noControllerRuntime)
			run(t, w)
		}
	}
	common.Record(t, all)
}
