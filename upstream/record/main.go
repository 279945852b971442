// Command record re-records the main module's scenarios (client-go v0.37, controller-runtime
// v0.25) into ../recorded (from upstream/: `go run ./record [-out DIR] [-only NAME]`). The
// scenarios need Go's virtual clock (testing/synctest), which needs a *testing.T, so this runs
// TestRecord in record_test.go with `go test`; `go test ./record -args -out DIR` does the same.
package main

import (
	"controlloop/upstream/common"
	// The scenarios run in the test binary, whose build info (the module versions in every
	// recorded header) lists the modules of this package's imports: cr brings controller-runtime.
	_ "controlloop/upstream/common/cr"
)

func main() { common.GoRun("controlloop/upstream/record", "recorded") }
