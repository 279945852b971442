package main

// The scenarios of what client-go v0.38 adds, which do not build on an older client-go: the
// pausable workqueue, and leader election's Recovery mode with its WriteGate.

import (
	"errors"
	"net/http"
	"sort"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/util/workqueue"

	"controlloop/upstream/common"
	"controlloop/upstream/common/clientgo"
)

// since038 are the scenarios recorded on client-go v0.38 and newer only.
func since038() []common.Scenario {
	p := common.ClientGoPrefix()
	return []common.Scenario{
		{Name: p + "workqueue_pause", How: "client-go " + common.ClientGo() + " workqueue.NewTyped (Pausable), in a synctest bubble: two getters waiting on a paused queue, adds while paused, Resume (what the getters received, sorted: both wake at once), then a shutdown while paused with an item queued; which queues NewTypedRateLimitingQueue and NewTypedDelayingQueue hand out are Pausable", Run: pauseScenario},
		{Name: p + "leader_election_recovery", How: "client-go " + common.ClientGo() + " tools/leaderelection with Recovery (no RecoveryDeadline) and ReleaseOnCancel, lease 15s, renew deadline 10s, retry 3s, on Lease default/controlloop over kubernetes/fake.NewSimpleClientset, in a synctest bubble per run. a is cut off from the API server from 4s to 20s (each of its Lease requests fails at once); its WriteGate wraps a transport that answers every request, and is probed with a POST and a GET at each step. Alone: a recovers the lease. With b (lease 15s, renew deadline 1s, retry 100ms), which takes over while a is cut off: a gives up when it sees b", Run: recoveryScenario},
	}
}

func pauseScenario(t *testing.T, w *common.Writer) {
	common.Bubble(t, func(t *testing.T) {
		q := workqueue.NewTyped[string]()
		got := make(chan string, 4)
		get := func() {
			item, shutdown := q.Get()
			if shutdown {
				item = "shutdown"
			}
			got <- item
		}
		received := func() []string {
			synctest.Wait()
			var out []string
			for {
				select {
				case item := <-got:
					out = append(out, item)
				default:
					sort.Strings(out) // two getters woken at once send in either order
					return out
				}
			}
		}
		q.Add("a")
		q.Pause()
		go get()
		go get()
		w.Printf("add a, pause, two gets: received %v, len %d", received(), q.Len())
		q.Add("b")
		q.Add("a")
		w.Printf("add b, add a while paused: received %v, len %d", received(), q.Len())
		q.Resume()
		first := received()
		w.Printf("resume: received %v, len %d", first, q.Len())
		for _, item := range first {
			q.Done(item)
		}
		q.Add("c")
		q.Pause()
		go get()
		w.Printf("done, add c, pause, a get: received %v, len %d", received(), q.Len())
		q.ShutDown()
		w.Printf("shut down while paused: received %v, len %d", received(), q.Len())
		rl := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
		dl := workqueue.NewTypedDelayingQueue[string]()
		_, rlPausable := rl.(workqueue.Pausable)
		_, dlPausable := dl.(workqueue.Pausable)
		w.Printf("Pausable: NewTypedRateLimitingQueue %v, NewTypedDelayingQueue %v", rlPausable, dlPausable)
		rl.ShutDown()
		dl.ShutDown()
	})
}

// answering is a transport that answers every request 200 with an empty body.
type answering struct{}

func (answering) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

// probe says what the gate does with a POST and a GET.
func probe(gate http.RoundTripper) string {
	out := ""
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		req, err := http.NewRequest(method, "http://apiserver.invalid/api/v1/namespaces/default/configmaps", nil)
		common.Must(err)
		resp, err := gate.RoundTrip(req)
		verdict := "passes"
		switch {
		case errors.Is(err, leaderelection.ErrWriteGateClosed):
			verdict = "refused (write gate closed)"
		case err != nil:
			verdict = "fails: " + err.Error()
		default:
			common.Must(resp.Body.Close())
		}
		if out != "" {
			out += ", "
		}
		out += method + " " + verdict
	}
	return out
}

func recoveryScenario(t *testing.T, w *common.Writer) {
	w.Note("in the run with b, b takes over at a jittered instant between 18s and 18.5s (it saw a's last renewal, at 3s, up to 220 ms later, and its acquire loop waits 100 ms to 220 ms between attempts); no line depends on it")
	for _, withB := range []bool{false, true} {
		common.Bubble(t, func(t *testing.T) { recoveryRun(t, w, withB) })
	}
}

func recoveryRun(t *testing.T, w *common.Writer, withB bool) {
	const cutOff, reconnect = 4 * time.Second, 20 * time.Second
	client := fake.NewSimpleClientset()
	var down atomic.Bool
	config := leaderelection.LeaderElectionConfig{
		Lock:          clientgo.LeaseLock("a", clientgo.CutOff(client.CoordinationV1(), &down)),
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 3 * time.Second,
		ReleaseOnCancel: true,
		Recovery:        &leaderelection.RecoveryConfig{},
	}
	start := time.Now()
	if withB {
		w.Printf("a and b:")
	} else {
		w.Printf("a alone:")
	}
	a := clientgo.StartElector(t, config)
	gate := a.WriteGate()(answering{})
	synctest.Wait()
	w.Printf("  0s: a runs: %s; a leads %v; gate: %s", clientgo.LeaseState(client), a.IsLeader(), probe(gate))
	var b *clientgo.Elector
	if withB {
		b = clientgo.StartElector(t, leaderelection.LeaderElectionConfig{
			Lock:          clientgo.LeaseLock("b", client.CoordinationV1()),
			LeaseDuration: 15 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
		})
		synctest.Wait()
	}
	clientgo.SleepUntil(start, cutOff)
	down.Store(true)
	w.Printf("  %s: a is cut off", clientgo.Seconds(cutOff))
	// a renewed last at 3s; its renew poll began at 6s and tried at 6, 9, 12 and 15; its
	// deadline passes at 16s.
	for _, at := range []time.Duration{15500 * time.Millisecond, 17 * time.Second} {
		clientgo.SleepUntil(start, at)
		w.Printf("  %s: %s; a leads %v, OnStoppedLeading %d, Run returned %v; gate: %s", clientgo.Seconds(at), clientgo.LeaseState(client), a.IsLeader(), a.Stopped.Load(), a.Returned(), probe(gate))
	}
	clientgo.SleepUntil(start, reconnect)
	down.Store(false)
	w.Printf("  %s: a reaches the API server again", clientgo.Seconds(reconnect))
	// a's recovery tries at 16, 19, 22, …: the first after the reconnection is at 22s.
	at := 23 * time.Second
	clientgo.SleepUntil(start, at)
	w.Printf("  %s: %s; a leads %v, OnStoppedLeading %d, Run returned %v, leading context cancelled %v; gate: %s", clientgo.Seconds(at), clientgo.LeaseState(client), a.IsLeader(), a.Stopped.Load(), a.Returned(), a.LeadingCancelled.Load(), probe(gate))
	a.Cancel()
	<-a.Done
	synctest.Wait()
	w.Printf("  a's context cancelled: %s; OnStoppedLeading %d; gate: %s", clientgo.LeaseState(client), a.Stopped.Load(), probe(gate))
	if b != nil {
		b.Cancel()
		<-b.Done
	}
}
