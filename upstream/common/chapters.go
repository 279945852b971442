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

// ---------------------------------------------------------------------------------------
// Chapter 07: the level design's storms (the port's lab::edge, its Design::Level half).
// ---------------------------------------------------------------------------------------

// EdgeParams are one of chapter 07's storms (the port's lab::edge::Params).
type EdgeParams struct {
	Storm
	Workers          int
	FailFirstCommand bool
	KillAfterWrite   int // 0: none
}

// EdgeOutcome is the level design's column of the port's lab::edge::Report.
type EdgeOutcome struct {
	Events, Reconciles, Failures, MaxHolders, Overlapping int
	FinalReplicas                                         int
	EndsRight                                             bool
	Converged                                             time.Duration
}

// LevelStorm is the port's lab::edge::run_async for the level design: ConfigMap w at 0 on the
// fake (its value stands for the Widget's spec.replicas), a controller-runtime controller with
// no predicate whose reconciler reads w from the cache and sets its world to it (one command of
// the storm's cost), settled for 1 s + 4 costs; then the writes (each after synctest.Wait); a
// kill after write k (the in-flight command abandoned) and a fresh process after the last
// write; then a drain of 1 s + 4 costs + cost × (writes + 10).
func LevelStorm(p EdgeParams) EdgeOutcome {
	client := SimpleClientset.New(ConfigMap("w", 0))
	world := NewWorld(p.Cost)
	node := NewNode(client, world, &Hooks{}, LevelOptions{Workers: p.Workers})
	node.Start()
	settle := time.Second + 4*p.Cost
	time.Sleep(settle)
	synctest.Wait()
	key := Namespace + "/w"
	if world.Replicas(key) != 0 {
		panic("the initial widget was never reconciled")
	}
	eventsBefore := node.Events()
	commandsBefore, _, _, _ := world.counts()
	if p.FailFirstCommand {
		world.FailNext(1)
	}
	writer := &matrixWriter{client: client} // resourceVersions as the fake leaves them
	for v := 1; v <= p.Writes; v++ {
		synctest.Wait()
		writer.write("w", v, nil)
		if p.KillAfterWrite == v {
			synctest.Wait() // the process hears this write before it dies
			node.Kill()
		}
		if v < p.Writes {
			time.Sleep(p.Gap)
		}
	}
	lastWrite := time.Now()
	if !node.Running() {
		node.Start()
	}
	time.Sleep(settle + p.Cost*time.Duration(p.Writes+10))
	synctest.Wait()
	if node.QueueLen() != 0 {
		panic("still busy after the drain")
	}
	commands, failures, overlapping, maxPerKey := world.counts()
	o := EdgeOutcome{
		Events:        node.Events() - eventsBefore,
		Reconciles:    commands - commandsBefore,
		Failures:      failures,
		MaxHolders:    maxPerKey,
		Overlapping:   overlapping,
		FinalReplicas: world.Replicas(key),
	}
	o.EndsRight = o.FinalReplicas == p.Writes
	if o.EndsRight {
		o.Converged = world.LastChange(key).Sub(lastWrite)
	}
	node.Shutdown()
	return o
}

// EdgeStorms are chapter 07's four storms.
func EdgeStorms() []struct {
	Name string
	P    EdgeParams
} {
	essay := EdgeParams{Storm: Essay, Workers: 1}
	two, order, restart := essay, essay, essay
	two.Workers = 2
	order.Writes, order.FailFirstCommand = 3, true
	restart.KillAfterWrite = 100
	return []struct {
		Name string
		P    EdgeParams
	}{{"ch07_dedup", essay}, {"ch07_single_writer", two}, {"ch07_order", order}, {"ch07_restart", restart}}
}

// EdgeHow says how chapter 07's lines are obtained.
func EdgeHow() string {
	return CRWho() + " (no predicate: every event queues the key; the reconciler reads ConfigMap w from the cache and sets the world to its value, a command of the storm's cost whose failure is returned as an error), in a synctest bubble, one per storm: the port's lab::edge::run_async, level design only, on fake.NewSimpleClientset; a kill comes once the process has heard write 100 (synctest.Wait), cancels the controller and its cache, and the command it had in flight is not applied; a new process's workers start at its source's second look at the cache's sync, 100 ms after it starts (client-go's WaitForCacheSync polls every 100 ms, and here the cache starts after the controller's handler is registered, so the first, immediate look finds it unsynced)"
}

// EdgeScenario records the level design's column of chapter 07's four storms.
func EdgeScenario(t *testing.T, w *Writer) {
	for _, s := range EdgeStorms() {
		var o EdgeOutcome
		Bubble(t, func(t *testing.T) { o = LevelStorm(s.P) })
		kill := "~"
		if s.P.KillAfterWrite > 0 {
			kill = fmt.Sprint(s.P.KillAfterWrite)
		}
		conv := "~"
		if o.EndsRight {
			conv = fmt.Sprint(o.Converged.Milliseconds())
		}
		w.Printf("%s: writes %d, gap_ms %d, cost_ms %d, workers %d, killed_after_write %s", s.Name, s.P.Writes, s.P.Gap.Milliseconds(), s.P.Cost.Milliseconds(), s.P.Workers, kill)
		w.Printf("  level: events %d, reconciles %d, failures %d, max_holders_per_key %d, overlapping_reconciles %d, final_replicas %d, ends_right %v, converged_ms_after_last_write %s",
			o.Events, o.Reconciles, o.Failures, o.MaxHolders, o.Overlapping, o.FinalReplicas, o.EndsRight, conv)
	}
}

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
