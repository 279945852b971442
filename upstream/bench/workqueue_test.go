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
			q := workqueue.NewTyped[string]()
			per := (b.N + tasks - 1) / tasks
			span := numKeys / tasks
			var wg sync.WaitGroup
			b.ResetTimer()
			for t := range tasks {
				wg.Go(func() {
					// Each task cycles through its own slice of keys, so no add ever meets
					// its key still dirty: every add is one item.
					for j := range per {
						q.Add(keys[t*span+j%span])
						k, _ := q.Get()
						q.Done(k)
					}
				})
			}
			wg.Wait()
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
