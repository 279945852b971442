package main

import (
	"testing"

	"controlloop/upstream/common"
	"controlloop/upstream/common/clientgo"
)

// TestRecord runs every client-go scenario the main module records, on client-go
// v0.38.0-beta.0, under client_go_v0.38_*. No controller-runtime is linked: chapter 05's
// check leaves controller-runtime's predicate out (its file says so), and no
// controller_runtime_* file is written. Then what v0.38 adds (since038_test.go).
func TestRecord(t *testing.T) {
	var all []common.Scenario
	all = append(all, clientgo.Scenarios(common.ClientGoPrefix())...)
	all = append(all, common.ClientGoScenarios(nil)...)
	all = append(all, since038()...)
	common.Record(t, all)
}
