package main

import "controlloop/upstream/common"

func init() {
	register("controller_runtime_v0.24_requeue", "controller-runtime "+common.RequeueHow, func(w *writer) {
		common.Requeue(w.printf)
	})
	register("controller_runtime_v0.24_default_limiter", "controller-runtime "+common.DefaultLimiterHow, func(w *writer) {
		common.DefaultLimiter(w.printf)
	})
}
