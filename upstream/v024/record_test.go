package main

import (
	"testing"

	"controlloop/upstream/common"
	"controlloop/upstream/common/clientgo"
	"controlloop/upstream/common/cr"
)

// TestRecord runs every scenario on client-go v0.36.3 and controller-runtime v0.24.1. The
// client-go scenarios keep the names without a release (workqueue_coalescing, …): they are
// the files tests/recorded_upstream/ reads, recorded on the client-go the port follows.
func TestRecord(t *testing.T) {
	var all []common.Scenario
	all = append(all, clientgo.Scenarios("")...)
	all = append(all, common.ClientGoScenarios(cr.ResourceVersionChanged)...)
	all = append(all, cr.Scenarios()...)
	common.Record(t, all)
}
