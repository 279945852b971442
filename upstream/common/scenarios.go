package common

import (
	"testing"
	"testing/synctest"
)

// ControllerRuntimeScenarios are the scenarios every recorder runs on its controller-runtime
// release, their files named controller_runtime_v0.N_*.
func ControllerRuntimeScenarios() []Scenario {
	p := ControllerRuntimePrefix()
	return []Scenario{
		{p + "requeue", "controller-runtime " + RequeueHow, func(t *testing.T, w *Writer) {
			synctest.Test(t, func(t *testing.T) { Requeue(w.Printf) })
		}},
		{p + "default_limiter", "controller-runtime " + DefaultLimiterHow, func(t *testing.T, w *Writer) {
			synctest.Test(t, func(t *testing.T) { DefaultLimiter(w.Printf) })
		}},
	}
}
