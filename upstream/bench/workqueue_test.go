// Package bench has the rows of benches/workqueue.rs, run on client-go's workqueue, so one
// machine measures client-go and the port in one sitting. Run from upstream/ with
//
//	go test -run '^$' -bench . -cpu 2 ./bench
//
// (-cpu 2 matches the port's two-thread tokio runtime). Go strings copy as pointer and
// length, so the "/String" rows do the same work as the main rows; they are kept so that
// both benchmarks have the same row names.
package bench

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

const numKeys = 1 << 16

var keys = func() []string {
	k := make([]string, numKeys)
	for i := range k {
		k[i] = fmt.Sprintf("default/obj-%07d", i)
	}
	return k
}()

func addGetDone1(b *testing.B) {
	q := workqueue.NewTyped[string]()
	for i := 0; b.Loop(); i++ {
		q.Add(keys[i%numKeys])
		k, _ := q.Get()
		q.Done(k)
	}
}

func addDuplicate1(b *testing.B) {
	q := workqueue.NewTyped[string]()
	q.Add(keys[0])
	for b.Loop() {
		q.Add(keys[0])
	}
}

func BenchmarkWorkqueue(b *testing.B) {
	b.Run("add_get_done/1_task", addGetDone1)
	b.Run("add_duplicate/1_task", addDuplicate1)
	b.Run("add_get_done/1_task/String", addGetDone1)
	b.Run("add_duplicate/1_task/String", addDuplicate1)
	for _, tasks := range []int{2, 16} {
		b.Run(fmt.Sprintf("add_get_done/%d_tasks", tasks), func(b *testing.B) {
			addGetDoneParallel(b, tasks)
		})
		b.Run(fmt.Sprintf("add_duplicate/%d_tasks", tasks), func(b *testing.B) {
			q := workqueue.NewTyped[string]()
			q.Add(keys[0])
			per := (b.N + tasks - 1) / tasks
			var wg sync.WaitGroup
			b.ResetTimer()
			for range tasks {
				wg.Go(func() {
					for range per {
						q.Add(keys[0])
					}
				})
			}
			wg.Wait()
		})
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
func addGetDoneParallel(b *testing.B, tasks int) {
	q := workqueue.NewTyped[string]()
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
				q.Add(keys[t*span+j%span])
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

func (d *detector) reconcile(key int) {
	if d.holders[key].Add(1) > 1 {
		d.violations.Add(1)
	}
	runtime.Gosched()
	d.holders[key].Add(-1)
	d.reconciles.Add(1)
}

func contentionQueue() *detector {
	d := &detector{}
	q := workqueue.NewTyped[int]()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				d.reconcile(k)
				q.Done(k)
			}
		})
	}
	for i := range adds {
		q.Add(i % hkeys)
	}
	q.ShutDown()
	wg.Wait()
	return d
}

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
	}{{"Queue", contentionQueue}, {"Channel", contentionChannel}} {
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
