package common

import (
	"testing"
)

// ClientGoScenarios are the scenarios on client-go alone that build on every release (the
// storms), their files named client_go_v0.N_*. The rest of client-go's scenarios need v0.36
// or newer: package clientgo.
func ClientGoScenarios() []Scenario {
	p := ClientGoPrefix()
	who := "client-go " + ClientGo() + " alone (SharedIndexInformer over the fake, resync 0; a handler that queues the key on every add and update; NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter); a worker loop: Get, read the indexer, work, Forget, Done)"
	var out []Scenario
	out = append(out, StormScenarios(p, who, ClientGoSubject)...)
	out = append(out, GapZeroScenarios(p, who, ClientGoSubject)...)
	out = append(out,
		Scenario{p + "queue_items", "client-go " + ClientGo() + " NewTypedRateLimitingQueue: chapter 07's first block, three updates of one object queued as keys and as payloads (each carrying its event's resourceVersion and change)", func(t *testing.T, w *Writer) {
			Bubble(t, func(t *testing.T) { QueueItems(w.Printf) })
		}},
		Scenario{p + "contention", "client-go " + ClientGo() + ": " + ContentionHow, ContentionScenario},
		Scenario{p + "method", MethodHow(), MethodScenario},
		Scenario{p + "done_without_forget_day", "client-go " + ClientGo() + " NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter), in a synctest bubble per run: chapter 02's hand-written worker loop, twelve failures in a row (each backoff asserted to double from 5 ms), a success with Done and with or without Forget, a day of quiet (24 h of virtual time), one failure; NumRequeues after the success, and how long the retry waited", DoneWithoutForgetScenario},
	)
	return out
}

// ControllerRuntimeScenarios are the scenarios every recorder runs on its controller-runtime
// release, their files named controller_runtime_v0.N_*.
func ControllerRuntimeScenarios() []Scenario {
	p := ControllerRuntimePrefix()
	out := []Scenario{
		{p + "requeue", "controller-runtime " + RequeueHow, func(t *testing.T, w *Writer) {
			Bubble(t, func(t *testing.T) { Requeue(w.Printf) })
		}},
		{p + "default_limiter", "controller-runtime " + DefaultLimiterHow, func(t *testing.T, w *Writer) {
			Bubble(t, func(t *testing.T) { DefaultLimiter(w.Printf) })
		}},
	}
	out = append(out,
		Scenario{p + "default_queue_walks", "controller-runtime " + DefaultQueueHow, DefaultQueueWalks},
		Scenario{p + "requeue_priority_queue", "controller-runtime " + RequeueDefaultHow, func(t *testing.T, w *Writer) {
			Bubble(t, func(t *testing.T) { RequeueOnPriorityQueue(w.Printf) })
		}},
	)
	out = append(out, StormScenarios(p, CRWho()+", a predicate keeping the storm's object", ControllerRuntimeSubject)...)
	out = append(out, Scenario{p + "storm_and_initial_list", StormAndInitialListHow(), StormAndInitialListScenario})
	out = append(out, Scenario{p + "resync", ResyncHow(), ResyncScenario})
	out = append(out, Scenario{p + "fault_matrix", MatrixHow(), MatrixScenario})
	out = append(out, Scenario{p + "edge_level", EdgeHow(), EdgeScenario})
	out = append(out, Scenario{p + "manager_lease_lost", ManagerLeaseHow(), ManagerLeaseLostScenario})
	return out
}

// CRWho names the controller-runtime controller the scenarios build, for the headers.
func CRWho() string {
	return "controller-runtime " + ControllerRuntime() + " (client-go " + ClientGo() + "): controller.NewTypedUnmanaged with its defaults (the queue and limiter it builds when none is set), source.Kind watches on controller-runtime's own cache (cache.New; its informers over the fake through cache.Options.NewInformer) with EnqueueRequestForObject, a reconciler reading through the cache"
}
