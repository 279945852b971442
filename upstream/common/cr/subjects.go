package cr

import (
	"context"
	"sync"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"controlloop/upstream/common"
)

// ---------------------------------------------------------------------------------------
// controller-runtime: controller.NewTypedUnmanaged with its defaults (the queue it builds,
// the limiter it picks), watching source.Kind on controller-runtime's own cache with
// EnqueueRequestForObject, and a reconciler that reads through the cache, as a manager's
// default client does.
// ---------------------------------------------------------------------------------------

// Add is one add the handler made: the key and the priority it asked for (nil: none, the
// queue's default 0; a client-go queue takes no priority).
type Add struct {
	Name     string
	Priority *int
	At       time.Time
}

// countingHandler counts the events a handler is given and the adds it makes, handing the
// inner handler a queue that counts (and keeps the priority queue's interface, so the handler
// takes the same path it takes on the bare queue).
type countingHandler struct {
	inner handler.TypedEventHandler[*corev1.ConfigMap, reconcile.Request]
	c     *handlerCounts
}

type handlerCounts struct {
	mu     sync.Mutex
	events map[string]int
	adds   []Add
	queue  workqueue.TypedRateLimitingInterface[reconcile.Request]
	// IsPriorityQueue: the controller's queue is controller-runtime's priority queue.
	IsPriorityQueue bool
}

func (c *handlerCounts) event(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events[name]++
}

func (c *handlerCounts) add(r reconcile.Request, priority *int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var p *int
	if priority != nil {
		p = ptr.To(*priority)
	}
	c.adds = append(c.adds, Add{r.Name, p, time.Now()})
}

func (c *handlerCounts) wrap(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	c.mu.Lock()
	if c.queue == nil {
		c.queue = q
	}
	c.mu.Unlock()
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		c.mu.Lock()
		c.IsPriorityQueue = true
		c.mu.Unlock()
		return &countingPQ{pq, c}
	}
	return &countingQ{q, c}
}

type countingQ struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	c *handlerCounts
}

func (q *countingQ) Add(r reconcile.Request) {
	q.c.add(r, nil)
	q.TypedRateLimitingInterface.Add(r)
}

type countingPQ struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	c *handlerCounts
}

func (q *countingPQ) Add(r reconcile.Request) {
	q.c.add(r, nil)
	q.PriorityQueue.Add(r)
}

func (q *countingPQ) AddWithOpts(o priorityqueue.AddOpts, rs ...reconcile.Request) {
	for _, r := range rs {
		q.c.add(r, o.Priority)
	}
	q.PriorityQueue.AddWithOpts(o, rs...)
}

func (h *countingHandler) Create(ctx context.Context, e event.TypedCreateEvent[*corev1.ConfigMap], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.c.event(e.Object.Name)
	h.inner.Create(ctx, e, h.c.wrap(q))
}

func (h *countingHandler) Update(ctx context.Context, e event.TypedUpdateEvent[*corev1.ConfigMap], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.c.event(e.ObjectNew.Name)
	h.inner.Update(ctx, e, h.c.wrap(q))
}

func (h *countingHandler) Delete(ctx context.Context, e event.TypedDeleteEvent[*corev1.ConfigMap], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.c.event(e.Object.Name)
	h.inner.Delete(ctx, e, h.c.wrap(q))
}

func (h *countingHandler) Generic(ctx context.Context, e event.TypedGenericEvent[*corev1.ConfigMap], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.c.event(e.Object.Name)
	h.inner.Generic(ctx, e, h.c.wrap(q))
}

// CRController is a running controller-runtime controller over a fake, as the scenarios
// build it.
type CRController struct {
	Cache  *CRCache
	Counts *handlerCounts
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   []error
	mu     sync.Mutex
}

// CROptions vary the controller a scenario starts.
type CROptions struct {
	Workers int
	// Predicate filters the watch (nil: none).
	Predicate func(*corev1.ConfigMap) bool
	// UsePriorityQueue: nil leaves controller-runtime's default.
	UsePriorityQueue *bool
	// SyncPeriod of the cache (nil: controller-runtime's default).
	SyncPeriod *time.Duration
	// Dropper for the cache's watches.
	Dropper *common.Dropper
	// RateLimiter for the controller (nil: controller-runtime's default).
	RateLimiter workqueue.TypedRateLimiter[reconcile.Request]
	// Predicates added to the watch as controller-runtime predicates.
	Predicates []predicate.TypedPredicate[*corev1.ConfigMap]
}

// StartCRController starts the cache and a controller watching ConfigMaps through it with
// EnqueueRequestForObject; reconcile gets the cache to read through.
func StartCRController(client kubernetes.Interface, o CROptions, reconcile func(ctx context.Context, c *CRCache, r reconcile.Request) (reconcile.Result, error)) *CRController {
	cache, err := NewCRCache(client, o.SyncPeriod, o.Dropper)
	common.Must(err)
	cc := &CRController{Cache: cache, Counts: &handlerCounts{events: map[string]int{}}}
	opts := controller.TypedOptions[reconcileRequest]{
		SkipNameValidation:      ptr.To(true),
		MaxConcurrentReconciles: o.Workers,
		UsePriorityQueue:        o.UsePriorityQueue,
		RateLimiter:             o.RateLimiter,
		Reconciler: reconcileFunc(func(ctx context.Context, r reconcileRequest) (reconcileResult, error) {
			return reconcile(ctx, cache, r)
		}),
	}
	c, err := controller.NewTypedUnmanaged("subject", opts)
	common.Must(err)
	preds := append([]predicate.TypedPredicate[*corev1.ConfigMap](nil), o.Predicates...)
	if o.Predicate != nil {
		preds = append(preds, predicate.NewTypedPredicateFuncs(o.Predicate))
	}
	h := &countingHandler{inner: &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{}, c: cc.Counts}
	common.Must(c.Watch(source.Kind(cache, &corev1.ConfigMap{}, handler.TypedEventHandler[*corev1.ConfigMap, reconcileRequest](h), preds...)))
	ctx, cancel := context.WithCancel(context.Background())
	cc.cancel = cancel
	cc.wg.Add(2)
	go func() {
		defer cc.wg.Done()
		cc.record(c.Start(ctx))
	}()
	// The controller's source registers its handler on the (not yet running) informer before
	// the cache starts, so the handler sees the initial list in the order the fake lists it
	// (by name). Started the other way round, a handler added to a running informer is handed
	// the indexer's contents in map order, which differs from run to run.
	synctest.Wait()
	go func() {
		defer cc.wg.Done()
		cc.record(cache.Start(ctx))
	}()
	return cc
}

type (
	reconcileRequest = reconcile.Request
	reconcileResult  = reconcile.Result
	reconcileFunc    = reconcile.Func
)

func (c *CRController) record(err error) {
	if err != nil {
		c.mu.Lock()
		c.errs = append(c.errs, err)
		c.mu.Unlock()
	}
}

// Stop cancels the controller and the cache and waits for both.
func (c *CRController) Stop() {
	c.cancel()
	c.wg.Wait()
}

// QueueLen is the controller's queue's Len (0 before the handler first saw it).
func (c *CRController) QueueLen() int {
	c.Counts.mu.Lock()
	q := c.Counts.queue
	c.Counts.mu.Unlock()
	if q == nil {
		return 0
	}
	return q.Len()
}

// Adds is every add the handler made so far.
func (c *CRController) Adds() []Add {
	c.Counts.mu.Lock()
	defer c.Counts.mu.Unlock()
	return append([]Add(nil), c.Counts.adds...)
}

// Events is how many events the handler heard for name.
func (c *CRController) Events(name string) int {
	c.Counts.mu.Lock()
	defer c.Counts.mu.Unlock()
	return c.Counts.events[name]
}

// EventsAll is how many events the handler heard, for every name.
func (c *CRController) EventsAll() int {
	c.Counts.mu.Lock()
	defer c.Counts.mu.Unlock()
	n := 0
	for _, e := range c.Counts.events {
		n += e
	}
	return n
}

// IsPriorityQueue: the controller built controller-runtime's priority queue.
func (c *CRController) IsPriorityQueue() bool {
	c.Counts.mu.Lock()
	defer c.Counts.mu.Unlock()
	return c.Counts.IsPriorityQueue
}

// Get reads name from the cache (nil if absent).
func (c *CRCache) GetConfigMap(ctx context.Context, name string) *corev1.ConfigMap {
	var cm corev1.ConfigMap
	if err := c.Get(ctx, types.NamespacedName{Namespace: common.Namespace, Name: name}, &cm); err != nil {
		return nil
	}
	return &cm
}

type crSubject struct{ *CRController }

func (s crSubject) Counts() (int, int) {
	adds := 0
	for _, a := range s.Adds() {
		if a.Name == common.Object {
			adds++
		}
	}
	return s.Events(common.Object), adds
}

func (s crSubject) CacheValue() int {
	cm := s.Cache.GetConfigMap(context.Background(), common.Object)
	if cm == nil {
		return -1
	}
	return common.ValueOf(cm)
}

// ControllerRuntimeSubject is the storm's controller on controller-runtime, its queue the
// release's default; a predicate keeps the storm's object only, as the port's rig::Named does.
func ControllerRuntimeSubject(client kubernetes.Interface, workers int, cost time.Duration, rec *common.Recorder) common.Subject {
	c := StartCRController(client, CROptions{
		Workers:   workers,
		Predicate: func(cm *corev1.ConfigMap) bool { return cm.Name == common.Object },
	}, func(ctx context.Context, cache *CRCache, r reconcile.Request) (reconcile.Result, error) {
		v := -1
		if cm := cache.GetConfigMap(ctx, r.Name); cm != nil {
			v = common.ValueOf(cm)
		}
		rec.Act(v, cost)
		return reconcile.Result{}, nil
	})
	return crSubject{c}
}
