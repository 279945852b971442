package cr

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"controlloop/upstream/common"
)

// ---------------------------------------------------------------------------------------
// Chapter 07: the level design's storms (the port's lab::edge, its Design::Level half).
// ---------------------------------------------------------------------------------------

// EdgeParams are one of chapter 07's storms (the port's lab::edge::Params).
type EdgeParams struct {
	common.Storm
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
	client := common.SimpleClientset.New(common.ConfigMap("w", 0))
	world := NewWorld(p.Cost)
	node := NewNode(client, world, &Hooks{}, LevelOptions{Workers: p.Workers})
	node.Start()
	settle := time.Second + 4*p.Cost
	time.Sleep(settle)
	synctest.Wait()
	key := common.Namespace + "/w"
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
	essay := EdgeParams{Storm: common.Essay, Workers: 1}
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
func EdgeScenario(t *testing.T, w *common.Writer) {
	for _, s := range EdgeStorms() {
		var o EdgeOutcome
		common.Bubble(t, func(t *testing.T) { o = LevelStorm(s.P) })
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
