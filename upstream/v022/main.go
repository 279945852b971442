// Command v022 runs the controller-runtime scenarios on controller-runtime v0.22 (client-go
// v0.34) and writes ../recorded/controller_runtime_v0.22_*.txt. It is a module of its own
// because one go.mod cannot hold two versions of controller-runtime.
//
// Usage, from upstream/v022/: go run . [-out ../recorded]
package main

import (
	"flag"

	"controlloop/upstream/common"
)

func main() {
	out := flag.String("out", "../recorded", "directory for the recorded files")
	flag.Parse()
	for _, s := range []struct {
		name, how string
		run       func(common.Printf)
	}{
		{"controller_runtime_v0.22_requeue", common.RequeueHow, common.Requeue},
		{"controller_runtime_v0.22_default_limiter", common.DefaultLimiterHow, common.DefaultLimiter},
	} {
		w := &common.Writer{}
		s.run(w.Printf)
		if err := w.Save(*out, s.name, "controller-runtime "+s.how); err != nil {
			panic(err)
		}
	}
}
