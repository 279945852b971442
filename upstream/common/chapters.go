package common

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// QueueItems is chapter 07's first block on client-go's rate-limiting queue: three updates of
// one object queued as keys and as payloads.
func QueueItems(printf Printf) {
	type change struct{ from, to int }
	type payload struct {
		key, resourceVersion string
		change               change
	}
	keys := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	payloads := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[payload]())
	defer keys.ShutDown()
	defer payloads.ShutDown()
	for i, c := range []change{{0, 1}, {1, 2}, {2, 3}} {
		keys.Add("default/w")
		payloads.Add(payload{"default/w", fmt.Sprint(10 + i), c})
	}
	printf("three updates of one widget")
	printf("  queue of keys:     %d item(s)", keys.Len())
	printf("  queue of payloads: %d item(s)", payloads.Len())
}

// ---------------------------------------------------------------------------------------
// Chapter 01: the contention harness (the port's lab::workqueue::contention).
// ---------------------------------------------------------------------------------------

// Contention parameters: 16 workers, 64 keys added round-robin, a channel of 1024.
const (
	ContentionWorkers = 16
	ContentionKeys    = 64
	ContentionChannel = 1024
)

// detector counts, for each key, the workers holding it; a take of a held key is a violation.
type detector struct {
	holders    [ContentionKeys]atomic.Int64
	violations atomic.Int64
	reconciles atomic.Int64
}

func (d *detector) reconcile(key int, cost time.Duration) {
	if d.holders[key].Add(1) > 1 {
		d.violations.Add(1)
	}
	if cost == 0 {
		runtime.Gosched() // one yield to the scheduler, as the port's yield_now
	} else {
		time.Sleep(cost)
	}
	d.holders[key].Add(-1)
	d.reconciles.Add(1)
}

// ContentionCounts is what one run counted.
type ContentionCounts struct{ Reconciles, Violations int64 }

// throughQueue: 16 workers Get, reconcile, Done on client-go's queue (workqueue.NewTyped)
// while the producer adds adds keys round-robin, gap apart (after synctest.Wait, unless gap
// is 0), then shuts the queue down.
func throughQueue(adds int, gap time.Duration, cost func(int) time.Duration) ContentionCounts {
	q := workqueue.NewTyped[int]()
	d := &detector{}
	var wg sync.WaitGroup
	for range ContentionWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				d.reconcile(k, cost(k))
				q.Done(k)
			}
		}()
	}
	for i := range adds {
		if gap > 0 {
			synctest.Wait()
		}
		q.Add(i % ContentionKeys)
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	q.ShutDownWithDrain()
	wg.Wait()
	return ContentionCounts{d.reconciles.Load(), d.violations.Load()}
}

// throughChannel: the same run through a channel of 1024 shared by the 16 workers.
func throughChannel(adds int, gap time.Duration, cost func(int) time.Duration) ContentionCounts {
	ch := make(chan int, ContentionChannel)
	d := &detector{}
	var wg sync.WaitGroup
	for range ContentionWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range ch {
				d.reconcile(k, cost(k))
			}
		}()
	}
	for i := range adds {
		if gap > 0 {
			synctest.Wait()
		}
		ch <- i % ContentionKeys
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	close(ch)
	wg.Wait()
	return ContentionCounts{d.reconciles.Load(), d.violations.Load()}
}

// ContentionHow says how chapter 01's contention lines are obtained.
const ContentionHow = "the port's lab::workqueue::contention harness on client-go's workqueue.NewTyped and on a Go channel of 1024, 16 worker goroutines, 64 keys added round-robin, a same-key detector; in a synctest bubble per run. Fixed schedule: 6400 adds 1 ms apart (each after synctest.Wait), key 0 costs 100 ms, the others 1 ms (a time.Sleep). As fast as it can: 320000 adds, no gap, each reconcile one runtime.Gosched; GOMAXPROCS as the test runs (two here), so its counts are the scheduler's: only the claims are recorded"

// ContentionScenario records both runs.
func ContentionScenario(t *testing.T, w *Writer) {
	fixed := func(k int) time.Duration {
		if k == 0 {
			return 100 * time.Millisecond
		}
		return time.Millisecond
	}
	var q, c ContentionCounts
	Bubble(t, func(t *testing.T) { q = throughQueue(100*ContentionKeys, time.Millisecond, fixed) })
	Bubble(t, func(t *testing.T) { c = throughChannel(100*ContentionKeys, time.Millisecond, fixed) })
	w.Printf("fixed schedule: 6400 adds 1 ms apart; key 0 costs 100 ms, the others 1 ms")
	w.Printf("handout                         adds  reconciles  violations")
	w.Printf("%-28s %7d %11d %11d", "queue", 100*ContentionKeys, q.Reconciles, q.Violations)
	w.Printf("%-28s %7d %11d %11d", "channel", 100*ContentionKeys, c.Reconciles, c.Violations)
	zero := func(int) time.Duration { return 0 }
	const adds = 320_000
	Bubble(t, func(t *testing.T) { q = throughQueue(adds, 0, zero) })
	Bubble(t, func(t *testing.T) { c = throughChannel(adds, 0, zero) })
	w.Printf("as fast as it can: %d adds, no gap, each reconcile one yield", adds)
	w.Printf("  queue: violations == 0: %v; %d <= reconciles < %d: %v", q.Violations == 0, ContentionKeys, adds, q.Reconciles >= ContentionKeys && q.Reconciles < adds)
	w.Printf("  channel: violations > 0: %v; reconciles == adds: %v", c.Violations > 0, c.Reconciles == adds)
	w.Note("as fast as it can, this run: queue %d reconciles, %d violations; channel %d reconciles, %d violations", q.Reconciles, q.Violations, c.Reconciles, c.Violations)
}
