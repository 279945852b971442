package cr

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"controlloop/upstream/common"
)

// World is the port's lab::edge::Downstream: what a controller drives. A command takes cost
// (a time.Sleep) and then sets a key's replicas; it counts commands, failures, and commands of
// one key that overlap (the same-key detector).
type World struct {
	mu          sync.Mutex
	cost        time.Duration
	replicas    map[string]int
	running     map[string]int
	Commands    int
	Failures    int
	Overlapping int
	MaxPerKey   int
	failNext    int
	lastChange  map[string]time.Time
	abandoned   int
}

// NewWorld is an empty world whose commands cost cost.
func NewWorld(cost time.Duration) *World {
	return &World{cost: cost, replicas: map[string]int{}, running: map[string]int{}, lastChange: map[string]time.Time{}}
}

// ErrUnavailable is the world refusing a command.
var ErrUnavailable = errors.New("downstream unavailable")

// FailNext makes the next n commands fail (after their cost).
func (w *World) FailNext(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failNext += n
}

// Set runs a command setting key to n; alive says, after the cost, whether the process that
// issued it still exists (a killed process's command is abandoned where it stands).
func (w *World) Set(key string, n int, alive func() bool) error {
	w.mu.Lock()
	w.Commands++
	w.running[key]++
	if w.running[key] > 1 {
		w.Overlapping++
	}
	if w.running[key] > w.MaxPerKey {
		w.MaxPerKey = w.running[key]
	}
	w.mu.Unlock()
	if w.cost > 0 {
		time.Sleep(w.cost)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running[key]--
	if alive != nil && !alive() {
		w.abandoned++
		return ErrUnavailable
	}
	if w.failNext > 0 {
		w.failNext--
		w.Failures++
		return ErrUnavailable
	}
	if old, ok := w.replicas[key]; !ok || old != n {
		w.lastChange[key] = time.Now()
	}
	w.replicas[key] = n
	return nil
}

// Replicas is key's replicas (-1: none).
func (w *World) Replicas(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n, ok := w.replicas[key]; ok {
		return n
	}
	return -1
}

// LastChange is when key's replicas last changed.
func (w *World) LastChange(key string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastChange[key]
}

// Snapshot counts.
func (w *World) counts() (commands, failures, overlapping, maxPerKey int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.Commands, w.Failures, w.Overlapping, w.MaxPerKey
}

// Hooks inject the reconciler faults of the fault matrix.
type Hooks struct {
	mu           sync.Mutex
	calls        int
	failed       int
	panicked     int
	panicEvery   int
	panicBase    int
	outageFrom   time.Time
	outageUntil  time.Time
	inFlight     int
	lastActivity time.Time
}

// Outage makes every reconcile fail, before its command, for d from now.
func (h *Hooks) Outage(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outageFrom, h.outageUntil = time.Now(), time.Now().Add(d)
}

// PanicEvery makes every n-th reconcile from now on panic.
func (h *Hooks) PanicEvery(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.panicEvery, h.panicBase = n, h.calls
}

// enter is called first thing in every reconcile.
func (h *Hooks) enter() error {
	h.mu.Lock()
	h.calls++
	h.inFlight++
	h.lastActivity = time.Now()
	n := h.calls
	if h.panicEvery > 0 && (n-h.panicBase)%h.panicEvery == 0 {
		h.panicked++
		h.mu.Unlock()
		panic(fmt.Sprintf("injected: reconcile %d panics", n))
	}
	now := time.Now()
	if !now.Before(h.outageFrom) && now.Before(h.outageUntil) {
		h.failed++
		h.mu.Unlock()
		return ErrUnavailable
	}
	h.mu.Unlock()
	return nil
}

func (h *Hooks) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inFlight--
	h.lastActivity = time.Now()
}

// quietFor: no reconcile ran for d.
func (h *Hooks) quietFor(d time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inFlight == 0 && time.Since(h.lastActivity) >= d
}

// LevelOptions are the level design's controller options.
type LevelOptions struct {
	Workers          int
	UsePriorityQueue *bool
	RateLimiter      workqueue.TypedRateLimiter[reconcile.Request]
}

// Node is the level-triggered controller process (the port's lab::edge::Process and
// lab::faults::Node for the level design): a controller-runtime controller and its cache over
// the fake, its reconciler reading the object from the cache and setting the world to it; it
// can be shut down, killed (its in-flight command is abandoned) and started again.
type Node struct {
	client  kubernetes.Interface
	world   *World
	hooks   *Hooks
	opts    LevelOptions
	mu      sync.Mutex
	current *CRController
	gen     int
	alive   bool
	// events heard by processes that are gone
	pastEvents int
	Starts     int
	dropper    *common.Dropper
}

// NewNode is a stopped process.
func NewNode(client kubernetes.Interface, world *World, hooks *Hooks, o LevelOptions) *Node {
	return &Node{client: client, world: world, hooks: hooks, opts: o}
}

// Start starts a fresh process: a new cache lists, a new controller with an empty queue.
func (n *Node) Start() {
	n.mu.Lock()
	n.gen++
	gen := n.gen
	n.alive = true
	n.Starts++
	n.mu.Unlock()
	alive := func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.alive && n.gen == gen
	}
	c := StartCRController(n.client, CROptions{Workers: n.opts.Workers, UsePriorityQueue: n.opts.UsePriorityQueue, RateLimiter: n.opts.RateLimiter, Dropper: n.dropper},
		func(ctx context.Context, cache *CRCache, r reconcile.Request) (res reconcile.Result, err error) {
			defer n.hooks.leave()
			if err := n.hooks.enter(); err != nil {
				return reconcile.Result{}, err
			}
			cm := cache.GetConfigMap(ctx, r.Name)
			if cm == nil {
				return reconcile.Result{}, nil
			}
			if err := n.world.Set(r.Namespace+"/"+r.Name, common.ValueOf(cm), alive); err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{}, nil
		})
	n.mu.Lock()
	n.current = c
	n.mu.Unlock()
}

// Events is every event the node's processes heard, summed over names.
func (n *Node) Events() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	total := n.pastEvents
	if n.current != nil {
		total += n.current.EventsAll()
	}
	return total
}

func (n *Node) stop(kill bool) {
	n.mu.Lock()
	c := n.current
	if kill {
		n.alive = false // the command in flight is abandoned
	}
	n.mu.Unlock()
	if c == nil {
		return
	}
	c.Stop()
	n.mu.Lock()
	n.pastEvents += c.EventsAll()
	n.current = nil
	n.alive = false
	n.mu.Unlock()
}

// Shutdown stops the process gracefully (the reconcile in flight finishes).
func (n *Node) Shutdown() { n.stop(false) }

// Kill stops the process at once: its command in flight is abandoned.
func (n *Node) Kill() { n.stop(true) }

// Running reports whether a process runs.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.current != nil
}

// QueueLen of the running process (0 if none).
func (n *Node) QueueLen() int {
	n.mu.Lock()
	c := n.current
	n.mu.Unlock()
	if c == nil {
		return 0
	}
	return c.QueueLen()
}

// matrixWriter writes the matrix's ConfigMaps; stamping, it puts a fresh resourceVersion on
// every write, one more than the write before's, as an API server would.
type matrixWriter struct {
	client kubernetes.Interface
	stamp  bool
	rv     int
}

// write sets ConfigMap name's data.value to value, with extra data keys beside it.
func (w *matrixWriter) write(name string, value int, extra map[string]string) {
	cm := common.ConfigMap(name, value)
	for k, v := range extra {
		cm.Data[k] = v
	}
	w.rv++
	if w.stamp {
		cm.ResourceVersion = strconv.Itoa(100000 + w.rv)
	}
	_, err := w.client.CoreV1().ConfigMaps(common.Namespace).Update(context.Background(), cm, metav1.UpdateOptions{})
	common.Must(err)
}

// Fault is a row of chapter 12's matrix that runs on the fake.
type Fault string

const (
	FaultNone              Fault = "no fault"
	FaultEventsDropped     Fault = "10 events dropped"
	FaultReconcilerPanics  Fault = "reconciler panics every third call"
	FaultReconcilerErrors  Fault = "reconciler errors for 100 ms"
	FaultStatusStorm       Fault = "status-write storm"
	FaultShutdownMidBurst  Fault = "shutdown mid-burst"
	FaultControllerRestart Fault = "controller restart mid-burst"
)

// MatrixFaults are the rows recorded.
var MatrixFaults = []Fault{FaultEventsDropped, FaultReconcilerPanics, FaultReconcilerErrors, FaultStatusStorm, FaultShutdownMidBurst, FaultControllerRestart}

// Matrix parameters: the port's lab::faults::Setup::matrix and the fault constants.
const (
	matrixObjects    = 4
	matrixWrites     = 200
	matrixFaultPoint = 125
	matrixDropped    = 10
	matrixStatus     = 400
)

var (
	matrixGap    = time.Millisecond
	matrixCost   = 20 * time.Millisecond
	matrixOutage = 100 * time.Millisecond
	matrixQuiet  = time.Second
	matrixLimit  = 30 * time.Minute
)

// RowResult is what one row measured for the level design.
type RowResult struct {
	Fault                        Fault
	Quiet                        bool
	Wrong                        []string
	Relists                      int
	Reconciles, Failed, Panicked int
	Commands, Overlapping        int
	Converged                    time.Duration // last world change after the last write
	LastReconcile                time.Duration // last reconcile after the last write
	QuietAfter                   time.Duration // when the run got quiet, after the last write
	Events                       int
	QueueKind                    string
}

// RunRow runs one row: 4 objects, 200 writes 1 ms apart (50 consecutive writes each), a
// 20 ms reconcile, one worker; the fault arrives with write 125.
func RunRow(fault Fault, o LevelOptions, stamp bool) RowResult {
	names := make([]string, matrixObjects)
	var objs []runtime.Object
	for i := range names {
		names[i] = fmt.Sprintf("w-%d", i)
		objs = append(objs, common.ConfigMap(names[i], 0))
	}
	client := common.SimpleClientset.New(objs...)
	world := NewWorld(matrixCost)
	hooks := &Hooks{}
	node := NewNode(client, world, hooks, o)
	var dropper *common.Dropper
	if fault == FaultEventsDropped {
		dropper = &common.Dropper{}
	}
	node.dropper = dropper
	node.Start()
	// Settle: every object reconciled once at 0.
	if !common.WaitUntil(30*time.Second, func() bool {
		for _, n := range names {
			if world.Replicas(common.Namespace+"/"+n) != 0 {
				return false
			}
		}
		return node.QueueLen() == 0 && hooks.quietFor(0)
	}) {
		panic("the initial reconciles never happened")
	}
	kind := QueueKind(node.current.Counts.queue)
	baseCalls := hooks.calls
	baseCommands, _, _, _ := world.counts()
	baseLists := countVerb(client.Actions(), "list")
	last := map[string]int{}
	w := &matrixWriter{client: client, stamp: stamp}
	for v := 1; v <= matrixWrites; v++ {
		name := names[(v-1)/(matrixWrites/matrixObjects)]
		synctest.Wait()
		last[name] = v // what the object holds from this write on
		if v == matrixFaultPoint {
			switch fault {
			case FaultEventsDropped:
				dropper.Drop(matrixDropped)
				w.write(name, v, nil)
			case FaultReconcilerPanics:
				hooks.PanicEvery(3)
				w.write(name, v, nil)
			case FaultReconcilerErrors:
				hooks.Outage(matrixOutage)
				w.write(name, v, nil)
			case FaultStatusStorm:
				w.write(name, v, nil)
				for i := range matrixStatus {
					// A status write: another data key changes, the value stays what it is.
					other := names[i%len(names)]
					w.write(other, last[other], map[string]string{"status": strconv.Itoa(i)})
					synctest.Wait()
				}
			case FaultShutdownMidBurst:
				w.write(name, v, nil)
				synctest.Wait() // the process hears this write first
				node.Shutdown() // it starts again after the burst
			case FaultControllerRestart:
				w.write(name, v, nil)
				synctest.Wait() // the process hears this write first
				node.Kill()
				node.Start()
			default:
				w.write(name, v, nil)
			}
		} else {
			w.write(name, v, nil)
		}
		time.Sleep(matrixGap)
	}
	lastWrite := time.Now()
	if !node.Running() {
		node.Start()
	}
	right := func() bool {
		for _, n := range names {
			if world.Replicas(common.Namespace+"/"+n) != last[n] {
				return false
			}
		}
		return true
	}
	quiet := common.WaitUntil(matrixLimit, func() bool {
		return right() && node.QueueLen() == 0 && hooks.quietFor(matrixQuiet)
	})
	r := RowResult{Fault: fault, Quiet: quiet, QueueKind: kind}
	r.QuietAfter = time.Since(lastWrite)
	for _, n := range names {
		if got := world.Replicas(common.Namespace + "/" + n); got != last[n] {
			r.Wrong = append(r.Wrong, fmt.Sprintf("%s runs %d, written %d", n, got, last[n]))
		}
		if lc := world.LastChange(common.Namespace + "/" + n); lc.After(lastWrite) && lc.Sub(lastWrite) > r.Converged {
			r.Converged = lc.Sub(lastWrite)
		}
	}
	hooks.mu.Lock()
	r.Reconciles, r.Failed, r.Panicked = hooks.calls-baseCalls, hooks.failed, hooks.panicked
	if hooks.lastActivity.After(lastWrite) {
		r.LastReconcile = hooks.lastActivity.Sub(lastWrite)
	}
	hooks.mu.Unlock()
	commands, _, overlapping, _ := world.counts()
	r.Commands, r.Overlapping = commands-baseCommands, overlapping
	r.Relists = countVerb(client.Actions(), "list") - baseLists
	r.Events = node.Events()
	node.Shutdown()
	return r
}

// Line prints a row.
func (r RowResult) Line() string {
	verdict := "ends right"
	if len(r.Wrong) > 0 {
		verdict = fmt.Sprintf("ends wrong: %d widgets, e.g. %s", len(r.Wrong), r.Wrong[0])
	}
	if !r.Quiet {
		verdict += fmt.Sprintf("; not quiet within %v", matrixLimit)
	}
	return fmt.Sprintf("%s: %s; relists %d; reconciles %d (failed %d, panicked %d), world commands %d, overlapping %d; converged %s ms after the last write, last reconcile %s ms after it",
		r.Fault, verdict, r.Relists, r.Reconciles, r.Failed, r.Panicked, r.Commands, r.Overlapping, common.Millis(r.Converged), common.Millis(r.LastReconcile))
}

// MatrixHow says how the rows are obtained.
func MatrixHow() string {
	return CRWho() + " (no predicate; the reconciler is the port's level design: read the object from the cache, set the world to its value, a command costing 20 ms), in a synctest bubble, one bubble per row: the port's lab::faults::Setup::matrix on fake.NewSimpleClientset: ConfigMaps w-0..w-3 at 0, 200 writes 1 ms apart (w-0 takes 1..50, w-1 51..100, …; each after synctest.Wait), one worker; the fault comes with write 125 (events: the next 10 watch events withheld from the informer; panics: every third reconcile from then on; errors: every reconcile fails, before its command, for 100 ms; status storm: 400 writes of another data key, round-robin over the four, each keeping the object's current value; shutdown: the controller and its cache stop gracefully and start again after the last write; restart: stopped at once, its command in flight abandoned, and started again; both once the process has heard write 125); a new process's workers start at its source's second look at the cache's sync, 100 ms after it starts (client-go's WaitForCacheSync polls every 100 ms, and here the cache starts after the controller's handler is registered, so the first, immediate look finds it unsynced); then until every object's world runs its last value, the queue is empty and no reconcile ran for 1 s (at most 30 min of virtual time, as the port's comparison waits; the chapter's matrix waits at most 10). Reconciles count every Reconcile call from the first write on, failed and panicked ones included; relists count the fake's list calls after the first"
}

// MatrixScenario records the rows on the default queue, and on the others where they differ.
func MatrixScenario(t *testing.T, w *common.Writer) {
	variants := []struct {
		label  string
		o      LevelOptions
		stamp  bool
		faults []Fault
	}{
		{"default queue, resourceVersions as the fake stores them (none)", LevelOptions{Workers: 1}, false, nil},
		{"default queue, each write stamped with a fresh resourceVersion", LevelOptions{Workers: 1}, true, nil},
		{"UsePriorityQueue=false (client-go's queue, DefaultTypedControllerRateLimiter)", LevelOptions{Workers: 1, UsePriorityQueue: ptr.To(false)}, false, nil},
		{"UsePriorityQueue=false with RateLimiter = ItemExponentialFailureRateLimiter(5ms, 1000s) alone (the port's per-item backoff row)",
			LevelOptions{Workers: 1, UsePriorityQueue: ptr.To(false), RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 1000*time.Second)}, false, []Fault{FaultReconcilerErrors}},
	}
	for i, v := range variants {
		if i > 0 {
			w.Printf("")
		}
		first := true
		faults := v.faults
		if faults == nil {
			faults = MatrixFaults
		}
		for _, fault := range faults {
			var r RowResult
			common.Bubble(t, func(t *testing.T) { r = RunRow(fault, v.o, v.stamp) })
			if first {
				w.Printf("%s; the queue: %s", v.label, r.QueueKind)
				first = false
			}
			w.Printf("  %s", r.Line())
		}
	}
}
