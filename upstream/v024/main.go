// Command v024 re-records the scenarios on controller-runtime v0.24.1 and client-go v0.36.3
// into ../recorded (`cd v024 && go run . [-out DIR] [-only NAME]`); it runs TestRecord with
// `go test`, as ../record does. A module of its own: one go.mod holds one controller-runtime.
package main

import (
	"controlloop/upstream/common"
	// The scenarios run in the test binary, whose build info (the module versions in every
	// recorded header) lists the modules of this package's imports: cr brings controller-runtime.
	_ "controlloop/upstream/common/cr"
)

func main() { common.GoRun("controlloop/upstream/v024", "../recorded") }
