package main

import (
	"testing"

	"controlloop/upstream/common"
)

// TestRecord runs the controller-runtime scenarios on controller-runtime v0.22.5 (client-go
// v0.34.3, older than the client-go scenarios build on).
func TestRecord(t *testing.T) {
	common.Record(t, common.ControllerRuntimeScenarios())
}
