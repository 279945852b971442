package common

import (
	"testing"
)

// ClientGoScenarios are the scenarios on client-go alone that build on every release (the
// storms, …), their files named client_go_v0.N_*. The rest of client-go's scenarios need v0.36
// or newer: package clientgo. rvChanged is controller-runtime's ResourceVersionChangedPredicate
// (cr.ResourceVersionChanged), which chapter 05's check also asks; nil where the recorder links
// no controller-runtime.
func ClientGoScenarios(rvChanged UpdatePredicate) []Scenario {
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
		Scenario{p + "method", MethodHow(rvChanged != nil), func(t *testing.T, w *Writer) { MethodScenario(t, w, rvChanged) }},
		Scenario{p + "done_without_forget_day", "client-go " + ClientGo() + " NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter), in a synctest bubble per run: chapter 02's hand-written worker loop, twelve failures in a row (each backoff asserted to double from 5 ms), a success with Done and with or without Forget, a day of quiet (24 h of virtual time), one failure; NumRequeues after the success, and how long the retry waited", DoneWithoutForgetScenario},
	)
	return out
}
