// Package bench has the rows of book/benches/workqueue.rs and book/benches/priorityqueue.rs,
// run on client-go's workqueue and on controller-runtime's priority queue, so one machine
// measures the upstream queues and the port in one sitting. Run from upstream/ with
//
//	go test -run '^$' -bench . -cpu 2 ./bench
//
// (-cpu 2 matches the port's two-thread tokio runtime).
//
// # Key kinds
//
// Every row runs with three kinds of key, as the port's rows do:
//
//   - the main row (no suffix): Go `string` keys "default/obj-NNNNNNN", pre-generated. A Go
//     string is a pointer and a length, like the port's `&'static str` main rows: passing
//     one copies two words and allocates nothing.
//   - "/String": the same Go `string` keys. Go has no owned-string type that copies its bytes,
//     so this row does exactly the work of the main row; it is run under its own name so that
//     every port row `R/String` (an owned Rust `String`, an allocation per copy) has a Go row
//     of that name to be compared with.
//   - "/Request": controller-runtime's `reconcile.Request` (a `types.NamespacedName`:
//     Namespace "default", Name "obj-NNNNNNN"), the key every controller-runtime controller
//     queues. Two strings: hashing and comparing one costs two strings' worth.
//
// The contention harness (BenchmarkWorkqueueContention_16x64x320k) has the three kinds too for
// its "Queue" row: its main row keeps int keys 0..63 (the port's `usize`), "Queue/String" and
// "Queue/Request" queue the first 64 keys above. Its race detector finds a key's slot from the
// key's last two digits (see slotOf), a constant-time step the int row does not have.
package bench

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const numKeys = 1 << 16

// name is the key's name part, "obj-NNNNNNN".
func name(i int) string { return fmt.Sprintf("obj-%07d", i) }

var keys = func() []string {
	k := make([]string, numKeys)
	for i := range k {
		k[i] = "default/" + name(i)
	}
	return k
}()

var requests = func() []reconcile.Request {
	r := make([]reconcile.Request, numKeys)
	for i := range r {
		r[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: name(i)}}
	}
	return r
}()

// kinds runs one row under its three names: R (string keys), R/String and R/Request.
func kinds(b *testing.B, row string, strings func(*testing.B, []string), reqs func(*testing.B, []reconcile.Request)) {
	b.Run(row, func(b *testing.B) { strings(b, keys) })
	b.Run(row+"/String", func(b *testing.B) { strings(b, keys) })
	b.Run(row+"/Request", func(b *testing.B) { reqs(b, requests) })
}

func addGetDone1[K comparable](b *testing.B, ks []K) {
	q := workqueue.NewTyped[K]()
	defer q.ShutDown()
	for i := 0; b.Loop(); i++ {
		q.Add(ks[i%numKeys])
		k, _ := q.Get()
		q.Done(k)
	}
}

func addDuplicate1[K comparable](b *testing.B, ks []K) {
	q := workqueue.NewTyped[K]()
	defer q.ShutDown()
	q.Add(ks[0])
	for b.Loop() {
		q.Add(ks[0])
	}
}

func addDuplicateParallel[K comparable](b *testing.B, ks []K, tasks int) {
	q := workqueue.NewTyped[K]()
	defer q.ShutDown()
	q.Add(ks[0])
	per := (b.N + tasks - 1) / tasks
	var wg sync.WaitGroup
	b.ResetTimer()
	for range tasks {
		wg.Go(func() {
			for range per {
				q.Add(ks[0])
			}
		})
	}
	wg.Wait()
}

func BenchmarkWorkqueue(b *testing.B) {
	kinds(b, "add_get_done/1_task", addGetDone1[string], addGetDone1[reconcile.Request])
	kinds(b, "add_duplicate/1_task", addDuplicate1[string], addDuplicate1[reconcile.Request])
	for _, tasks := range []int{2, 16} {
		kinds(b, fmt.Sprintf("add_get_done/%d_tasks", tasks),
			func(b *testing.B, ks []string) { addGetDoneParallel(b, ks, tasks) },
			func(b *testing.B, ks []reconcile.Request) { addGetDoneParallel(b, ks, tasks) })
		kinds(b, fmt.Sprintf("add_duplicate/%d_tasks", tasks),
			func(b *testing.B, ks []string) { addDuplicateParallel(b, ks, tasks) },
			func(b *testing.B, ks []reconcile.Request) { addDuplicateParallel(b, ks, tasks) })
	}
}

// padded is one goroutine's progress, on its own cache line.
type padded struct {
	completed atomic.Int64
	waiting   atomic.Bool
	finished  atomic.Bool
	_         [48]byte
}

// addGetDoneParallel is the port's many-task row. Each task cycles through its own slice of
// keys, as in benches/workqueue.rs; under Go's preemptive scheduler a goroutine can be
// descheduled between Get and Done while the key's owner laps its slice twice, and the
// second Add then merges into the first: one Get is left waiting forever (seen at a million
// iterations with 16 goroutines on two CPUs). The run therefore watches for every goroutine
// being finished or blocked in Get on an empty queue, shuts the queue down to release them,
// and reports the time per completed iteration.
func addGetDoneParallel[K comparable](b *testing.B, ks []K, tasks int) {
	q := workqueue.NewTyped[K]()
	defer q.ShutDown()
	per := (b.N + tasks - 1) / tasks
	span := numKeys / tasks
	progress := make([]padded, tasks)
	var wg sync.WaitGroup
	start := time.Now()
	for t := range tasks {
		p := &progress[t]
		wg.Go(func() {
			defer p.finished.Store(true)
			for j := range per {
				q.Add(ks[t*span+j%span])
				p.waiting.Store(true)
				k, shutdown := q.Get()
				p.waiting.Store(false)
				if shutdown {
					return
				}
				q.Done(k)
				p.completed.Add(1)
			}
		})
	}
	stuck := func() bool {
		for i := range progress {
			if !progress[i].finished.Load() && !progress[i].waiting.Load() {
				return false
			}
		}
		return q.Len() == 0
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for wait := true; wait; {
		select {
		case <-done:
			wait = false
		case <-time.After(time.Millisecond):
			if stuck() && stuck() {
				q.ShutDown()
			}
		}
	}
	elapsed := time.Since(start)
	var completed int64
	for i := range progress {
		completed += progress[i].completed.Load()
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(completed), "ns/op")
}

// The contention harness of src/lab/workqueue.rs: one producer adds 320,000 keys round-robin
// over 64, 16 workers take, "reconcile" (yield once while holding the key) and release.
const (
	workers = 16
	hkeys   = 64
	adds    = 320_000
	chanCap = 1024
)

type detector struct {
	holders    [hkeys]atomic.Int32
	violations atomic.Int64
	reconciles atomic.Int64
}

func (d *detector) reconcile(slot int) {
	if d.holders[slot].Add(1) > 1 {
		d.violations.Add(1)
	}
	runtime.Gosched()
	d.holders[slot].Add(-1)
	d.reconciles.Add(1)
}

// lastTwo reads the slot from a name ending in two decimal digits ("obj-0000042" → 42): the
// first 64 keys differ only there.
func lastTwo(s string) int {
	return int(s[len(s)-2]-'0')*10 + int(s[len(s)-1]-'0')
}

// contentionQueue runs the harness through client-go's queue with the keys ks (hkeys of them)
// and slotOf, which maps a key back to its index in ks.
func contentionQueue[K comparable](ks []K, slotOf func(K) int) *detector {
	d := &detector{}
	q := workqueue.NewTyped[K]()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				d.reconcile(slotOf(k))
				q.Done(k)
			}
		})
	}
	for i := range adds {
		q.Add(ks[i%hkeys])
	}
	q.ShutDown()
	wg.Wait()
	return d
}

var intKeys = func() []int {
	k := make([]int, hkeys)
	for i := range k {
		k[i] = i
	}
	return k
}()

func contentionChannel() *detector {
	d := &detector{}
	ch := make(chan int, chanCap)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range ch {
				d.reconcile(k)
			}
		})
	}
	for i := range adds {
		ch <- i % hkeys
	}
	close(ch)
	wg.Wait()
	return d
}

func BenchmarkWorkqueueContention_16x64x320k(b *testing.B) {
	for _, v := range []struct {
		name string
		run  func() *detector
	}{
		{"Queue", func() *detector { return contentionQueue(intKeys, func(k int) int { return k }) }},
		{"Queue/String", func() *detector { return contentionQueue(keys[:hkeys], lastTwo) }},
		{"Queue/Request", func() *detector {
			return contentionQueue(requests[:hkeys], func(r reconcile.Request) int { return lastTwo(r.Name) })
		}},
		{"Channel", contentionChannel},
	} {
		b.Run(v.name, func(b *testing.B) {
			var d *detector
			start := time.Now()
			for b.Loop() {
				d = v.run()
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/run")
			b.ReportMetric(float64(d.reconciles.Load()), "reconciles")
			b.ReportMetric(float64(d.violations.Load()), "violations")
		})
	}
}
