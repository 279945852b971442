package main

import (
	"testing"

	"controlloop/upstream/common"
	"controlloop/upstream/common/clientgo"
	"controlloop/upstream/common/cr"
)

// TestRecord runs every scenario of the main module: client-go's under client_go_v0.37_*,
// controller-runtime's under controller_runtime_v0.25_*, and feature_gates_by_release.
func TestRecord(t *testing.T) {
	var all []common.Scenario
	all = append(all, clientgo.Scenarios(common.ClientGoPrefix())...)
	all = append(all, common.ClientGoScenarios(cr.ResourceVersionChanged)...)
	all = append(all, clientgo.ByRelease())
	all = append(all, cr.Scenarios()...)
	common.Record(t, all)
}
