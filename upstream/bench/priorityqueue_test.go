package bench

// The rows of book/benches/priorityqueue.rs: controller-runtime v0.25's priority queue beside
// client-go's rate-limiting queue, both with the rate limiter controller-runtime v0.25's
// controller picks when none is set and the priority queue is on (its default): per-item
// exponential backoff from 5 ms to 1000 s, and nothing else. Each row with the three key kinds
// of workqueue_test.go.
//
//   - add_get_done_1000: add 1,000 distinct keys, then Get and Done each.
//   - add_duplicate: add a key that is already queued (every add merges).
//
// The priority queue is built as controller-runtime's own benchmarks build it: New with an
// empty name (no metrics; the port's rows use an unnamed queue too) and the zero logger, which
// its state-logging goroutine never writes to. New starts its goroutines at once; every queue
// is shut down when its row ends. An Add only appends to the queue's add buffer; Get asks the
// queue's goroutine for an item and that goroutine flushes the buffer first, so a Get after
// the row's Adds always finds a ready key and never waits for a timer.

import (
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const batch = 1000

// defaultLimiter is controller-runtime v0.25's default limiter with UsePriorityQueue unset
// (pkg/controller/controller.go, NewTypedUnmanaged).
func defaultLimiter[K comparable]() workqueue.TypedRateLimiter[K] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[K](5*time.Millisecond, 1000*time.Second)
}

func rateLimitingQueue[K comparable]() workqueue.TypedRateLimitingInterface[K] {
	return workqueue.NewTypedRateLimitingQueue(defaultLimiter[K]())
}

func priorityQueue[K comparable]() workqueue.TypedRateLimitingInterface[K] {
	return priorityqueue.New("", func(o *priorityqueue.Opts[K]) {
		o.RateLimiter = defaultLimiter[K]()
	})
}

func pqAddGetDone[K comparable](b *testing.B, newQueue func() workqueue.TypedRateLimitingInterface[K], ks []K) {
	q := newQueue()
	defer q.ShutDown()
	for b.Loop() {
		for _, k := range ks[:batch] {
			q.Add(k)
		}
		for range batch {
			k, shutdown := q.Get()
			if shutdown {
				b.Fatal("the queue shut down during the row")
			}
			q.Done(k)
		}
	}
}

func pqAddDuplicate[K comparable](b *testing.B, newQueue func() workqueue.TypedRateLimitingInterface[K], ks []K) {
	q := newQueue()
	defer q.ShutDown()
	q.Add(ks[0])
	for b.Loop() {
		q.Add(ks[0])
	}
}

// peers are the two queues of every row, under the port's names for them.
var peers = []struct {
	name     string
	strings  func() workqueue.TypedRateLimitingInterface[string]
	requests func() workqueue.TypedRateLimitingInterface[reconcile.Request]
}{
	{"rate_limiting_queue", rateLimitingQueue[string], rateLimitingQueue[reconcile.Request]},
	{"priority_queue", priorityQueue[string], priorityQueue[reconcile.Request]},
}

func BenchmarkPriorityqueue(b *testing.B) {
	for _, v := range peers {
		kinds(b, "add_get_done_1000/"+v.name,
			func(b *testing.B, ks []string) { pqAddGetDone(b, v.strings, ks) },
			func(b *testing.B, ks []reconcile.Request) { pqAddGetDone(b, v.requests, ks) })
	}
	for _, v := range peers {
		kinds(b, "add_duplicate/"+v.name,
			func(b *testing.B, ks []string) { pqAddDuplicate(b, v.strings, ks) },
			func(b *testing.B, ks []reconcile.Request) { pqAddDuplicate(b, v.requests, ks) })
	}
}
