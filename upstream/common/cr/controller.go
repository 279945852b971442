package cr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"controlloop/upstream/common"
)

// recordingQueue is a client-go rate-limiting queue that logs the calls a controller makes.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	mu    sync.Mutex
	calls []string
	done  chan struct{}
}

func (q *recordingQueue) log(call string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, call)
}

func (q *recordingQueue) AddRateLimited(r reconcile.Request) {
	q.log("AddRateLimited")
	q.TypedRateLimitingInterface.AddRateLimited(r)
}

func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.log("AddAfter " + d.String())
	q.TypedRateLimitingInterface.AddAfter(r, d)
}

func (q *recordingQueue) Add(r reconcile.Request) {
	q.log("Add")
	q.TypedRateLimitingInterface.Add(r)
}

func (q *recordingQueue) Forget(r reconcile.Request) {
	q.log("Forget")
	q.TypedRateLimitingInterface.Forget(r)
}

func (q *recordingQueue) Done(r reconcile.Request) {
	q.log("Done")
	q.TypedRateLimitingInterface.Done(r)
	select {
	case q.done <- struct{}{}:
	default:
	}
}

var webRequest = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}}

// runOnce starts a controller whose source adds one request, lets the reconciler return
// outcome once, and returns the queue calls up to the first Done and NumRequeues after it.
func runOnce(name string, outcome func() (reconcile.Result, error)) (string, int) {
	queues := make(chan *recordingQueue, 1)
	var once sync.Once
	c, err := controller.NewTypedUnmanaged(name, controller.TypedOptions[reconcile.Request]{
		SkipNameValidation: ptr.To(true),
		UsePriorityQueue:   ptr.To(false),
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			var res reconcile.Result
			var err error
			first := false
			once.Do(func() { first = true })
			if first {
				res, err = outcome()
			}
			return res, err
		}),
		NewQueue: func(_ string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			q := &recordingQueue{
				TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(rl),
				done:                       make(chan struct{}, 1),
			}
			queues <- q
			return q
		},
	})
	common.Must(err)
	common.Must(c.Watch(source.Func(func(_ context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		queue.Add(webRequest)
		return nil
	})))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		_ = c.Start(ctx)
		close(stopped)
	}()
	var q *recordingQueue
	select {
	case q = <-queues:
	case <-time.After(10 * time.Second):
		panic("the controller never built its queue: Start stuck?")
	}
	select {
	case <-q.done:
	case <-time.After(10 * time.Second):
		panic("the controller never called Done: worker stuck?")
	}
	q.mu.Lock()
	calls := q.calls[1:] // the source's Add
	n := q.NumRequeues(webRequest)
	q.mu.Unlock()
	cancel()
	<-stopped
	return strings.Join(calls, ", "), n
}

// RequeueHow says how the requeue lines are obtained, for the recorded header.
const RequeueHow = "controller.NewTypedUnmanaged (UsePriorityQueue=false, NewQueue = a client-go rate-limiting queue that logs its calls), one request, the reconciler's first outcome, in a synctest bubble; the calls after the source's Add, up to the first Done, and NumRequeues after"

// Requeue records the queue calls a controller makes for each reconcile outcome.
func Requeue(printf common.Printf) {
	cases := []struct {
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
	for i, c := range cases {
		calls, n := runOnce(fmt.Sprintf("requeue-%d", i), c.outcome)
		printf("%s: %s; num_requeues %d", c.name, calls, n)
	}
}

// DefaultLimiterHow says how the default-limiter lines are obtained.
const DefaultLimiterHow = "controller.NewTypedUnmanaged with RateLimiter unset: the limiter it hands NewQueue, asked When for 120 fresh requests back to back (in a synctest bubble: no time passes between the calls; printed rounded to the millisecond), with UsePriorityQueue unset, false and true"

// DefaultLimiter records the limiter a controller picks when none is configured.
func DefaultLimiter(printf common.Printf) {
	for _, pq := range []struct {
		label string
		use   *bool
	}{{"UsePriorityQueue unset", nil}, {"UsePriorityQueue=false", ptr.To(false)}, {"UsePriorityQueue=true", ptr.To(true)}} {
		limiters := make(chan workqueue.TypedRateLimiter[reconcile.Request], 1)
		c, err := controller.NewTypedUnmanaged("limiter", controller.TypedOptions[reconcile.Request]{
			SkipNameValidation: ptr.To(true),
			UsePriorityQueue:   pq.use,
			Reconciler:         reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
			NewQueue: func(_ string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
				limiters <- rl
				return workqueue.NewTypedRateLimitingQueue(rl)
			},
		})
		common.Must(err)
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() {
			_ = c.Start(ctx)
			close(stopped)
		}()
		var limiter workqueue.TypedRateLimiter[reconcile.Request]
		select {
		case limiter = <-limiters:
		case <-time.After(10 * time.Second):
			panic("the controller never built its queue: Start stuck?")
		}
		cancel()
		<-stopped
		printf("%s:", pq.label)
		var delays []string
		for i := 1; i <= 120; i++ {
			r := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "obj-" + common.Pad3(i)}}
			delays = append(delays, limiter.When(r).Round(time.Millisecond).String())
		}
		for i := 0; i < 120; {
			j := i
			for j < 120 && delays[j] == delays[i] {
				j++
			}
			if j == i+1 {
				printf("  request %s: %s", common.Pad3(i+1), delays[i])
			} else {
				printf("  requests %s-%s: %s", common.Pad3(i+1), common.Pad3(j), delays[i])
			}
			i = j
		}
	}
}
