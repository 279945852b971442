package common

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Storm is one write storm: Writes writes of data.value = 1..Writes to one ConfigMap, Gap
// apart, behind a reconciler that works Cost (a time.Sleep) after reading the value.
type Storm struct {
	Writes    int
	Gap, Cost time.Duration
}

// Essay is the essay's storm, the port's lab::rig::ESSAY: 200 writes, 1 ms apart, 20 ms per
// reconcile.
var Essay = Storm{Writes: 200, Gap: time.Millisecond, Cost: 20 * time.Millisecond}

// Sweep parameters, the port's lab::burst::sweeps (COSTS_MS, WRITES, GAPS_MS) and
// ch06::below_gap_virtual's (gap, cost) pairs.
var (
	SweepCostsMS   = []int{0, 1, 5, 10, 20, 50, 100}
	SweepWrites    = []int{100, 200, 400, 800}
	SweepGapsMS    = []int{0, 1, 4, 8}
	BelowGapPairMS = [][2]int{{2, 0}, {2, 1}, {4, 3}, {8, 0}, {8, 5}, {8, 7}}
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// StormRun is a storm and how it is driven.
type StormRun struct {
	Storm
	Workers int
	Fake    Fake
	// BackToBack: the writer does not let the informer catch up before each write (no
	// synctest.Wait); only meaningful at gap 0, and not deterministic on two Ps.
	BackToBack bool
	// StampRV: each write carries resourceVersion "<1000+value>", as an API server would give
	// it (the fake keeps the resourceVersion a write carries, and sets none itself).
	StampRV bool
}

// Observation is one reconcile of the storm's object: the value it read, when it ran.
type Observation struct {
	Value      int
	Start, End time.Time
}

// Recorder logs the reconciles of one subject.
type Recorder struct {
	mu          sync.Mutex
	obs         []Observation
	inFlight    int
	maxInFlight int
}

// Act is one reconcile that read value: it works cost, then is logged.
func (r *Recorder) Act(value int, cost time.Duration) {
	r.mu.Lock()
	r.inFlight++
	if r.inFlight > r.maxInFlight {
		r.maxInFlight = r.inFlight
	}
	start := time.Now()
	r.mu.Unlock()
	if cost > 0 {
		time.Sleep(cost)
	}
	r.mu.Lock()
	r.inFlight--
	r.obs = append(r.obs, Observation{value, start, time.Now()})
	r.mu.Unlock()
}

func (r *Recorder) snapshot() ([]Observation, int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Observation(nil), r.obs...), r.inFlight, r.maxInFlight
}

// Subject is a controller under a storm: it counts what its handler heard and queued, and
// says when nothing is queued or running.
type Subject interface {
	// Counts: events the handler heard for the object, keys it added to the queue.
	Counts() (events, keys int)
	// QueueLen is the queue's Len.
	QueueLen() int
	// CacheValue is the object's value in the informer's cache.
	CacheValue() int
	// Stop stops the controller and its informer and waits for them.
	Stop()
}

// NewSubject starts a subject over client (inside the bubble), logging to rec.
type NewSubject func(client kubernetes.Interface, workers int, cost time.Duration, rec *Recorder) Subject

// StormReport is what one storm measured, after the initial reconcile of value 0.
type StormReport struct {
	Run          StormRun
	Events, Keys int
	Observed     []Observation
	Span         time.Duration
	Converge     time.Duration
	FinalInCache int
	MaxInFlight  int
	// Panic is what the writer's write panicked with, if it did ("" if not), and at which write.
	Panic      string
	PanicWrite int
}

// WaitUntil lets the bubble settle and checks cond, one virtual millisecond at a time, for at
// most limit; false if cond never held.
func WaitUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		synctest.Wait()
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// WriteValue sets the object to value (an Update of the whole ConfigMap, as the essay's writer
// does), recovering the fake's panic when a watcher's channel is full.
func WriteValue(client kubernetes.Interface, value int, stamp bool) (panicked string) {
	defer func() {
		if p := recover(); p != nil {
			panicked = fmt.Sprint(p)
		}
	}()
	cm := ConfigMap(Object, value)
	if stamp {
		cm.ResourceVersion = strconv.Itoa(1000 + value)
	}
	if _, err := client.CoreV1().ConfigMaps(Namespace).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		return "update: " + err.Error()
	}
	return ""
}

// RunStorm runs one storm on a fresh fake in the current bubble: the subject starts and
// reconciles value 0; then the writes, each after synctest.Wait (so at an instant where a
// write and a reconcile's end coincide, the reconcile goes first: it reads the cache before
// the write) unless BackToBack; then it waits until every event is in and nothing is queued
// or running.
func RunStorm(run StormRun, newSubject NewSubject) (StormReport, error) {
	initial := ConfigMap(Object, 0)
	if run.StampRV {
		initial.ResourceVersion = "1000"
	}
	client := run.Fake.New(initial)
	rec := &Recorder{}
	subj := newSubject(client, run.Workers, run.Cost, rec)
	defer subj.Stop()
	idle := func() bool {
		_, inFlight, _ := rec.snapshot()
		return inFlight == 0 && subj.QueueLen() == 0
	}
	settled := WaitUntil(30*time.Second, func() bool {
		obs, _, _ := rec.snapshot()
		return len(obs) > 0 && obs[len(obs)-1].Value == 0 && idle()
	})
	if !settled {
		return StormReport{}, fmt.Errorf("the initial reconcile of value 0 never happened")
	}
	baseObs, _, _ := rec.snapshot()
	baseEvents, baseKeys := subj.Counts()

	report := StormReport{Run: run}
	started := time.Now()
	for v := 1; v <= run.Writes; v++ {
		if !run.BackToBack {
			synctest.Wait()
		}
		if p := WriteValue(client, v, run.StampRV); p != "" && report.Panic == "" {
			report.Panic, report.PanicWrite = p, v
		}
		if v < run.Writes && run.Gap > 0 {
			time.Sleep(run.Gap)
		}
	}
	finished := time.Now()
	report.Span = finished.Sub(started)
	limit := 30*time.Second + (run.Cost+5*time.Millisecond)*time.Duration(run.Writes)
	quiet := WaitUntil(limit, func() bool {
		events, _ := subj.Counts()
		return (events-baseEvents >= run.Writes || report.Panic != "") && idle()
	})
	if !quiet {
		events, _ := subj.Counts()
		return StormReport{}, fmt.Errorf("never quiet: %d of %d events heard", events-baseEvents, run.Writes)
	}
	// Held quiet for a reconcile's cost and a little, as the port's measure does.
	time.Sleep(run.Cost + 2*time.Millisecond)
	synctest.Wait()
	obs, _, maxInFlight := rec.snapshot()
	report.Observed = obs[len(baseObs):]
	events, keys := subj.Counts()
	report.Events, report.Keys = events-baseEvents, keys-baseKeys
	report.FinalInCache = subj.CacheValue()
	report.MaxInFlight = maxInFlight
	if n := len(report.Observed); n > 0 {
		report.Converge = report.Observed[n-1].End.Sub(finished)
	}
	return report, nil
}

// Round3 rounds x to three decimals.
func Round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// Float prints a float as the port prints an f64: the shortest decimal that reads back the same.
func Float(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// Millis prints d in milliseconds, to the microsecond.
func Millis(d time.Duration) string { return Float(float64(d.Microseconds()) / 1000) }

// Reconciles of the storm's object after the initial one.
func (r StormReport) Reconciles() int { return len(r.Observed) }

// Collapse is events / reconciles, to three decimals.
func (r StormReport) Collapse() float64 {
	if r.Reconciles() == 0 {
		return 0
	}
	return Round3(float64(r.Events) / float64(r.Reconciles()))
}

// Expected is min(writes, span / cost + 1), the count of a reconciler that is always busy.
func (r StormReport) Expected() float64 {
	if r.Run.Cost == 0 {
		return float64(r.Run.Writes)
	}
	return Round3(math.Min(float64(r.Run.Writes), r.Span.Seconds()/r.Run.Cost.Seconds()+1))
}

func (r StormReport) finalObserved() string {
	if n := len(r.Observed); n > 0 {
		return value(r.Observed[n-1].Value)
	}
	return "none"
}

func value(v int) string {
	if v < 0 {
		return "none"
	}
	return strconv.Itoa(v)
}

// Summary prints the run in the lines of the port's Report::summary (chapter 06's first
// snapshot), with the storm's own values.
func (r StormReport) Summary(printf Printf) {
	run := r.Run
	printf("%d writes, %s ms apart, %s ms per reconcile, %d worker(s), virtual clock (synctest)", run.Writes, Millis(run.Gap), Millis(run.Cost), run.Workers)
	if r.Panic != "" {
		printf("the writer's write %d panicked: %s", r.PanicWrite, r.Panic)
	}
	printf("events heard %d, keys queued %d, reconciles %d (collapse %s)", r.Events, r.Keys, r.Reconciles(), Float(r.Collapse()))
	soc := "-"
	if run.Cost > 0 {
		soc = Float(Round3(r.Span.Seconds()/run.Cost.Seconds() + 1))
	}
	printf("span %s ms; span / cost + 1 = %s", Millis(r.Span), soc)
	var vals []string
	seen := map[int]bool{}
	for _, o := range r.Observed {
		vals = append(vals, value(o.Value))
		seen[o.Value] = true
	}
	never := 0
	for v := 1; v <= run.Writes; v++ {
		if !seen[v] {
			never++
		}
	}
	printf("observed, in order: %s", strings.Join(vals, ", "))
	printf("never observed: %d of %d values", never, run.Writes)
	printf("final: written %d, in the cache %s, last acted on %s", run.Writes, value(r.FinalInCache), r.finalObserved())
	printf("converged %s ms after the last write; most reconciles of the object at once: %d", Millis(r.Converge), r.MaxInFlight)
}

// TableHeader and Row print the port's sweep table (lab::burst::sweeps::rows_table).
func TableHeader(printf Printf) {
	printf("%6s %4s %5s %6s %8s %10s %8s %8s %6s %11s", "writes", "gap", "cost", "events", "span ms", "reconciles", "expected", "collapse", "final", "converge ms")
}

// Row is one storm as a row of TableHeader's table.
func (r StormReport) Row(printf Printf) {
	printf("%6d %4d %5d %6d %8s %10d %8s %8s %6s %11s", r.Run.Writes, r.Run.Gap.Milliseconds(), r.Run.Cost.Milliseconds(), r.Events,
		Millis(r.Span), r.Reconciles(), Float(r.Expected()), Float(r.Collapse()), r.finalObserved(), Millis(r.Converge))
}

// Sweeps are the storms of chapter 06's three sweeps and its below-the-gap runs.
func Sweeps() (names []string, runs [][]StormRun) {
	base := StormRun{Storm: Essay, Workers: 1}
	var cost, writes, gap, below []StormRun
	for _, c := range SweepCostsMS {
		r := base
		r.Cost = ms(c)
		cost = append(cost, r)
	}
	for _, w := range SweepWrites {
		r := base
		r.Writes = w
		writes = append(writes, r)
	}
	for _, g := range SweepGapsMS {
		r := base
		r.Gap = ms(g)
		gap = append(gap, r)
	}
	for _, p := range BelowGapPairMS {
		r := base
		r.Gap, r.Cost = ms(p[0]), ms(p[1])
		below = append(below, r)
	}
	return []string{
			"cost sweep: 200 writes 1 ms apart, reconcile cost 0, 1, 5, 10, 20, 50, 100 ms",
			"write-count sweep: 100, 200, 400, 800 writes 1 ms apart, 20 ms reconciles",
			"gap sweep: 200 writes 0, 1, 4, 8 ms apart, 20 ms reconciles",
			"below the gap: 200 writes, (gap, cost) = (2, 0), (2, 1), (4, 3), (8, 0), (8, 5), (8, 7) ms",
		},
		[][]StormRun{cost, writes, gap, below}
}

// GapZeroRuns are the gap-0 storms on both fakes, back to back (the writer never lets the
// informer run in between) and with the informer caught up before each write.
func GapZeroRuns() []StormRun {
	var out []StormRun
	for _, fk := range []Fake{SimpleClientset, FieldManagedClientset} {
		for _, b2b := range []bool{true, false} {
			out = append(out, StormRun{Storm: Storm{Writes: 200, Gap: 0, Cost: 20 * time.Millisecond}, Workers: 1, Fake: fk, BackToBack: b2b})
		}
	}
	return out
}

// sortedKeys is for printing maps in a fixed order.
func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
