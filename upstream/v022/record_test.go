package main

import (
	"strings"
	"testing"

	"controlloop/upstream/common"
	"controlloop/upstream/common/cr"
)

// TestRecord runs the scenarios that build on controller-runtime v0.22.5 and client-go v0.34.3
// (package clientgo's need v0.36 or newer). Left out: the client-go scenarios whose informer
// has a resync period of 0. client-go v0.34's reflector then waits on a channel made when
// the package loads, outside any synctest bubble, so synctest never counts the informer as
// durably blocked and the bubble's clock never advances (v0.36 and v0.37 do not do this).
// controller-runtime's informers all have a resync period (SyncPeriod, 10 h by default), so
// its scenarios run.
func TestRecord(t *testing.T) {
	var all []common.Scenario
	for _, s := range common.ClientGoScenarios(cr.ResourceVersionChanged) {
		if strings.Contains(s.Name, "_storm_") || strings.HasSuffix(s.Name, "_method") {
			continue
		}
		all = append(all, s)
	}
	all = append(all, cr.Scenarios()...)
	common.Record(t, all)
}
