// Package cr has the scenarios that run on controller-runtime, their files named
// controller_runtime_v0.N_*. Every recorder that links a controller-runtime release imports
// it; the recorder of a client-go release no controller-runtime is built on does not.
package cr

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"controlloop/upstream/common"
)

// scenario is one recorded file of this package.
func scenario(name, how string, run func(t *testing.T, w *common.Writer)) common.Scenario {
	return common.Scenario{Name: name, How: how, Run: run}
}

// Scenarios are the scenarios every recorder runs on its controller-runtime release.
func Scenarios() []common.Scenario {
	p := common.ControllerRuntimePrefix()
	out := []common.Scenario{
		scenario(p+"requeue", "controller-runtime "+RequeueHow, func(t *testing.T, w *common.Writer) {
			common.Bubble(t, func(t *testing.T) { Requeue(w.Printf) })
		}),
		scenario(p+"default_limiter", "controller-runtime "+DefaultLimiterHow, func(t *testing.T, w *common.Writer) {
			common.Bubble(t, func(t *testing.T) { DefaultLimiter(w.Printf) })
		}),
		scenario(p+"default_queue_walks", "controller-runtime "+DefaultQueueHow, DefaultQueueWalks),
		scenario(p+"requeue_priority_queue", "controller-runtime "+RequeueDefaultHow, func(t *testing.T, w *common.Writer) {
			common.Bubble(t, func(t *testing.T) { RequeueOnPriorityQueue(w.Printf) })
		}),
	}
	out = append(out, common.StormScenarios(p, CRWho()+", a predicate keeping the storm's object", ControllerRuntimeSubject)...)
	return append(out,
		scenario(p+"storm_and_initial_list", StormAndInitialListHow(), StormAndInitialListScenario),
		scenario(p+"resync", ResyncHow(), ResyncScenario),
		scenario(p+"fault_matrix", MatrixHow(), MatrixScenario),
		scenario(p+"edge_level", EdgeHow(), EdgeScenario),
		scenario(p+"manager_lease_lost", ManagerLeaseHow(), ManagerLeaseLostScenario),
	)
}

// ResourceVersionChanged is controller-runtime's ResourceVersionChangedPredicate asked about an
// update, for chapter 05's check (common.ClientGoScenarios).
func ResourceVersionChanged(old, new *corev1.ConfigMap) bool {
	return predicate.ResourceVersionChangedPredicate{}.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: new})
}

// CRWho names the controller-runtime controller the scenarios build, for the headers.
func CRWho() string {
	return "controller-runtime " + common.ControllerRuntime() + " (client-go " + common.ClientGo() + "): controller.NewTypedUnmanaged with its defaults (the queue and limiter it builds when none is set), source.Kind watches on controller-runtime's own cache (cache.New; its informers over the fake through cache.Options.NewInformer) with EnqueueRequestForObject, a reconciler reading through the cache"
}
