package cr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"controlloop/upstream/common"
)

// heldSource is a syncing source that hands the controller's queue out and holds the
// controller's start (its workers) until released: the queue a controller builds, with no
// worker taking from it.
type heldSource struct {
	queues  chan workqueue.TypedRateLimitingInterface[reconcile.Request]
	release chan struct{}
}

func (s *heldSource) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.queues <- q
	return nil
}

func (s *heldSource) WaitForSync(ctx context.Context) error {
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DefaultQueue is the queue controller.NewTypedUnmanaged builds when no queue, limiter or
// UsePriorityQueue is set, taken from a controller held before its workers start. stop cancels
// the controller, which shuts the queue down. Call it inside a bubble.
func DefaultQueue(name string) (q priorityqueue.PriorityQueue[reconcile.Request], stop func()) {
	src := &heldSource{queues: make(chan workqueue.TypedRateLimitingInterface[reconcile.Request], 1), release: make(chan struct{})}
	c, err := controller.NewTypedUnmanaged(name, controller.TypedOptions[reconcile.Request]{
		SkipNameValidation: ptr.To(true),
		CacheSyncTimeout:   1000 * time.Hour, // the walks hold the start for virtual hours
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}),
	})
	common.Must(err)
	common.Must(c.Watch(src))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		_ = c.Start(ctx)
		close(stopped)
	}()
	got := <-src.queues
	return got.(priorityqueue.PriorityQueue[reconcile.Request]), func() {
		cancel()
		<-stopped
	}
}

// QueueKind names a queue as the headers and bodies do.
func QueueKind(q any) string {
	if IsControllerRuntimePriorityQueue(q) {
		return "controller-runtime's priority queue"
	}
	return "client-go's rate-limiting queue (behind controller-runtime's priority-queue interface)"
}

// IsControllerRuntimePriorityQueue: q is priorityqueue.New's queue, not controller-runtime's
// wrapper around a client-go queue.
func IsControllerRuntimePriorityQueue(q any) bool {
	return !strings.Contains(fmt.Sprintf("%T", q), "priorityQueueWrapper")
}

var web = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}}

// getWithin hands out the next item, if one comes within d (virtual time); the goroutine
// that waits is returned, to be read later.
func getWithin(q priorityqueue.PriorityQueue[reconcile.Request], d time.Duration) (reconcile.Request, bool, chan reconcile.Request) {
	ch := make(chan reconcile.Request, 1)
	go func() {
		if item, _, shutdown := q.GetWithPriority(); !shutdown {
			ch <- item
		}
	}()
	time.Sleep(d)
	synctest.Wait()
	select {
	case item := <-ch:
		return item, true, nil
	default:
		return reconcile.Request{}, false, ch
	}
}

// walk is chapter 01's walk on q (the port's controller_queue): len after each step.
func walk(q priorityqueue.PriorityQueue[reconcile.Request], printf common.Printf) {
	printf("step                                 len")
	row := func(step string) {
		synctest.Wait()
		printf("%-36s %3d", step, q.Len())
	}
	for range 100_000 {
		q.Add(web)
	}
	row("100000 adds of default/web")
	item, _, _ := getWithin(q, 0)
	row("a worker claims it")
	for range 200 {
		q.Add(web)
	}
	row("200 adds while the worker holds it")
	q.Done(item)
	row("the worker is done")
	again, got, _ := getWithin(q, 0)
	if !got {
		panic("the key was not handed out again after done")
	}
	row("a second claim takes it")
	q.Done(again)
	_, got, _ = getWithin(q, time.Hour)
	printf("a third get within 1h: returned %v", got)
}

// forgetWithoutDone is chapter 02's Forget where Done was meant, on q.
func forgetWithoutDone(q priorityqueue.PriorityQueue[reconcile.Request], printf common.Printf) {
	q.Add(web)
	item, _, _ := getWithin(q, 0)
	printf("add, get -> %s", item)
	q.AddRateLimited(web)
	q.Forget(web)
	synctest.Wait() // the priority queue asks its limiter when its goroutine flushes the add
	printf("add_rate_limited, forget: num_requeues %d, len %d", q.NumRequeues(web), q.Len())
	for range 100 {
		q.Add(web)
	}
	printf("100 adds: len %d", q.Len())
	_, got, pending := getWithin(q, 500*time.Millisecond)
	printf("get within 500ms: returned %v", got)
	q.Done(web)
	synctest.Wait()
	select {
	case item := <-pending:
		printf("late done: the waiting get -> %s", item)
		q.Done(item)
	default:
		printf("late done: the waiting get still waits")
	}
}

// requeueAfterAndChange is chapter 04's remedy on q: a worker answers every hand-out as
// controller-runtime answers Result{RequeueAfter: 1h} (Forget, AddAfter 1h, Done); the first
// requeue is made at 0 h, a change (Add) comes at 0.5 h; the hand-outs until 3.75 h.
func requeueAfterAndChange(q priorityqueue.PriorityQueue[reconcile.Request], printf common.Printf) {
	t0 := time.Now()
	var mu sync.Mutex
	var at []string
	go func() { // ends when the caller's stop shuts the queue down
		for {
			item, prio, shutdown := q.GetWithPriority()
			if shutdown {
				return
			}
			mu.Lock()
			at = append(at, fmt.Sprintf("%s (priority %d)", hours(time.Since(t0)), prio))
			mu.Unlock()
			q.Forget(item)
			q.AddWithOpts(priorityqueue.AddOpts{After: time.Hour, Priority: ptr.To(prio)}, item)
			q.Done(item)
		}
	}()
	q.AddAfter(web, time.Hour)
	time.Sleep(30 * time.Minute)
	q.Add(web)
	time.Sleep(3*time.Hour + 15*time.Minute)
	synctest.Wait()
	mu.Lock()
	printf("AddAfter(1h) at 0h, Add at 0.5h; hand-outs until 3.75h: %s", strings.Join(at, ", "))
	mu.Unlock()
}

// hours prints d in hours, as the port's chapter 04 does ("0.5", "1", "22.5").
func hours(d time.Duration) string { return common.Float(common.Round3(d.Hours())) + "h" }

// DefaultQueueHow says how the default-queue walks are obtained.
const DefaultQueueHow = "the queue controller.NewTypedUnmanaged builds when no queue, limiter or UsePriorityQueue is set, taken from the controller by a syncing source that holds its start (no worker runs; the scenario is the worker), in a synctest bubble; each walk on a fresh controller's queue; len and num_requeues are read after synctest.Wait (the priority queue flushes its add buffer, and asks its limiter, on a goroutine of its own)"

// DefaultQueueWalks: chapter 01's walk, chapter 02's Forget without Done and chapter 04's
// change against a waiting requeue, each on the queue a controller builds by default.
func DefaultQueueWalks(t *testing.T, w *common.Writer) {
	for i, c := range []struct {
		title string
		run   func(priorityqueue.PriorityQueue[reconcile.Request], common.Printf)
	}{
		{"chapter 01, the walk", walk},
		{"chapter 02, forget without done", forgetWithoutDone},
		{"chapter 04, a change while a requeue waits", requeueAfterAndChange},
	} {
		common.Bubble(t, func(t *testing.T) {
			q, stop := DefaultQueue(fmt.Sprintf("walk-%d", i))
			defer stop()
			if i > 0 {
				w.Printf("")
			}
			w.Printf("%s (%s):", c.title, QueueKind(q))
			c.run(q, w.Printf)
		})
	}
}

// loggingPQ is a priority-queue-interface queue that logs the calls a controller makes.
type loggingPQ struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	mu    sync.Mutex
	calls []string
	gets  []time.Time
	prios []int
	// numRequeuesAtDone is NumRequeues right after the first Done.
	numRequeuesAtDone *int
}

func (q *loggingPQ) log(s string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, s)
}

func opts(o priorityqueue.AddOpts) string {
	var parts []string
	if o.RateLimited {
		parts = append(parts, "RateLimited")
	}
	if o.After > 0 {
		parts = append(parts, "After "+o.After.String())
	}
	if o.Priority != nil {
		parts = append(parts, fmt.Sprintf("Priority %d", *o.Priority))
	}
	return "AddWithOpts{" + strings.Join(parts, ", ") + "}"
}

func (q *loggingPQ) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	q.log(opts(o))
	q.PriorityQueue.AddWithOpts(o, items...)
}
func (q *loggingPQ) Add(r reconcile.Request) {
	q.log("Add")
	q.PriorityQueue.Add(r)
}
func (q *loggingPQ) AddAfter(r reconcile.Request, d time.Duration) {
	q.log("AddAfter " + d.String())
	q.PriorityQueue.AddAfter(r, d)
}
func (q *loggingPQ) AddRateLimited(r reconcile.Request) {
	q.log("AddRateLimited")
	q.PriorityQueue.AddRateLimited(r)
}
func (q *loggingPQ) Forget(r reconcile.Request) {
	q.log("Forget")
	q.PriorityQueue.Forget(r)
}
func (q *loggingPQ) Done(r reconcile.Request) {
	q.log("Done")
	q.PriorityQueue.Done(r)
	// The queue takes adds through a buffer its own goroutine flushes (and only then asks the
	// limiter): let it settle before reading the limiter's count.
	synctest.Wait()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.numRequeuesAtDone == nil {
		q.numRequeuesAtDone = ptr.To(q.PriorityQueue.NumRequeues(r))
	}
}
func (q *loggingPQ) GetWithPriority() (reconcile.Request, int, bool) {
	r, p, s := q.PriorityQueue.GetWithPriority()
	if !s {
		q.mu.Lock()
		q.gets = append(q.gets, time.Now())
		q.prios = append(q.prios, p)
		q.mu.Unlock()
	}
	return r, p, s
}

// requeueOnDefault runs one reconcile outcome on a controller whose queue is the default
// priority queue (priorityqueue.New with the limiter the controller hands NewQueue, as
// NewTypedUnmanaged's default NewQueue builds it), logged: the calls up to the first Done,
// NumRequeues then, and when (virtual time after the first reconcile) the second reconcile
// came, within an hour.
func requeueOnDefault(name string, outcome func() (reconcile.Result, error)) string {
	queues := make(chan *loggingPQ, 1)
	var once sync.Once
	c, err := controller.NewTypedUnmanaged(name, controller.TypedOptions[reconcile.Request]{
		SkipNameValidation: ptr.To(true),
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			first := false
			once.Do(func() { first = true })
			if first {
				return outcome()
			}
			return reconcile.Result{}, nil
		}),
		NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			q := &loggingPQ{PriorityQueue: priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
				o.RateLimiter = rl
			})}
			queues <- q
			return q
		},
	})
	common.Must(err)
	common.Must(c.Watch(sourceFunc(func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) { q.Add(webRequest) })))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		_ = c.Start(ctx)
		close(stopped)
	}()
	q := <-queues
	time.Sleep(time.Hour)
	synctest.Wait()
	q.mu.Lock()
	calls := q.calls[1:] // the source's Add
	var first []string
	for _, call := range calls {
		first = append(first, call)
		if call == "Done" {
			break
		}
	}
	n := *q.numRequeuesAtDone
	next := "no second reconcile within 1h"
	if len(q.gets) > 1 {
		next = fmt.Sprintf("second reconcile %v after the first was handed out, at priority %d", q.gets[1].Sub(q.gets[0]), q.prios[1])
	}
	q.mu.Unlock()
	cancel()
	<-stopped
	return fmt.Sprintf("%s; num_requeues %d; %s", strings.Join(first, ", "), n, next)
}

// RequeueDefaultHow says how the requeue-on-the-default-queue lines are obtained.
const RequeueDefaultHow = "controller.NewTypedUnmanaged with NewQueue building the priority queue as its default NewQueue does (priorityqueue.New with the limiter the controller hands it), behind a wrapper that logs the calls; one request, the reconciler's first outcome (later reconciles return Result{}), in a synctest bubble; the calls after the source's Add up to the first Done, NumRequeues right after it once the queue's goroutines settled (synctest.Wait: the queue flushes its add buffer, and asks the limiter, on a goroutine of its own), and when the second reconcile came"

// RequeueOnPriorityQueue records each outcome's queue calls on the priority queue.
func RequeueOnPriorityQueue(printf common.Printf) {
	for i, c := range outcomes {
		printf("%s: %s", c.name, requeueOnDefault(fmt.Sprintf("pq-requeue-%d", i), c.outcome))
	}
}

var outcomes = []struct {
	name    string
	outcome func() (reconcile.Result, error)
}{
	{"Result{}", func() (reconcile.Result, error) { return reconcile.Result{}, nil }},
	{"Result{Requeue: true}", func() (reconcile.Result, error) { return reconcile.Result{Requeue: true}, nil }},
	{"Result{RequeueAfter: 30s}", func() (reconcile.Result, error) { return reconcile.Result{RequeueAfter: 30 * time.Second}, nil }},
	{"Result{Requeue: true, RequeueAfter: 30s}", func() (reconcile.Result, error) {
		return reconcile.Result{Requeue: true, RequeueAfter: 30 * time.Second}, nil
	}},
	{"error", func() (reconcile.Result, error) { return reconcile.Result{}, errors.New("boom") }},
	{"error + Result{RequeueAfter: 30s}", func() (reconcile.Result, error) {
		return reconcile.Result{RequeueAfter: 30 * time.Second}, errors.New("boom")
	}},
	{"TerminalError", func() (reconcile.Result, error) {
		return reconcile.Result{}, reconcile.TerminalError(errors.New("boom"))
	}},
	{"panic", func() (reconcile.Result, error) { panic("boom") }},
}

// sourceFunc is a source that calls f with the controller's queue when it starts.
func sourceFunc(f func(workqueue.TypedRateLimitingInterface[reconcile.Request])) source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		f(q)
		return nil
	})
}
