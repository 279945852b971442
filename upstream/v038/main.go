// Command v038 re-records the client-go scenarios on client-go v0.38.0-beta.0 into
// ../recorded (`cd v038 && GOTOOLCHAIN=go1.27.3 go run . [-out DIR] [-only NAME]`); it runs
// TestRecord with `go test`, as ../record does. A module of its own: client-go v0.38 needs Go
// 1.27, and no controller-runtime release built on it is served yet, so this module links
// client-go alone (common and common/clientgo, never common/cr).
package main

import "controlloop/upstream/common"

func main() { common.GoRun("controlloop/upstream/v038", "../recorded") }
