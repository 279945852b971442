package clientgo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"controlloop/upstream/common"
)

// The batches of the atomic RealFIFO, and what an informer that pops them
// (InOrderInformersBatchProcess) hands its handlers and holds in its store meanwhile. Recorded
// from client-go v0.37 on: v0.38 changed where a batch ends and what a batch does.

// batchGates are the gates that decide how an informer pops its FIFO.
var batchGates = []features.Feature{
	features.InOrderInformers, features.AtomicFIFO, features.UnlockWhileProcessingFIFO, features.InOrderInformersBatchProcess,
}

func printGates(w *writer) {
	var on []string
	for _, f := range batchGates {
		on = append(on, string(f)+" "+onOff(features.FeatureGates().Enabled(f)))
	}
	w.printf("gates, as this release enables them standalone: %s", strings.Join(on, ", "))
}

// keyFailsFor is MetaNamespaceKeyFunc, except that once armed it fails for the ConfigMap named
// name: an object whose key could be computed when it was queued and cannot when it is popped.
func keyFailsFor(name string, armed *atomic.Bool) cache.KeyFunc {
	return func(obj any) (string, error) {
		if c, ok := obj.(*corev1.ConfigMap); ok && armed.Load() && c.Name == name {
			return "", errors.New("no key for " + name)
		}
		return cache.MetaNamespaceKeyFunc(obj)
	}
}

// unkeyable is what a transform turns an object into when no key can be computed for it: it
// has no object metadata.
type unkeyable struct{ name string }

// breakAtV2 is a transform that turns the ConfigMap named name, at data.v = 2, into an
// unkeyable object. The FIFO computes an object's key before it transforms it, so the delta is
// queued, and every key computed after that fails.
func breakAtV2(name string) cache.TransformFunc {
	return func(obj any) (any, error) {
		if c, ok := obj.(*corev1.ConfigMap); ok && c.Name == name && c.Data["v"] == "2" {
			return unkeyable{name}, nil
		}
		return obj, nil
	}
}

// heldRun is one informer run: the objects at v1, the informer synced, then the gate object
// is updated to v2 and the informer's processing is held on it while writes are made (each
// after synctest.Wait: the reflector has queued the one before), then released.
type heldRun struct {
	writes    []*corev1.ConfigMap
	transform cache.TransformFunc
}

func (r heldRun) names() []string {
	var names []string
	seen := map[string]bool{}
	for _, o := range r.writes {
		if !seen[o.Name] {
			seen[o.Name] = true
			names = append(names, o.Name)
		}
	}
	return names
}

func (r heldRun) client() *fake.Clientset {
	objs := []runtime.Object{cm("gate", 1)}
	for _, n := range r.names() {
		objs = append(objs, cm(n, 1))
	}
	return fake.NewSimpleClientset(objs...)
}

func (r heldRun) describeWrites() string {
	var ws []string
	for _, o := range r.writes {
		ws = append(ws, "update "+objLabel(o))
	}
	return strings.Join(ws, ", ")
}

// storeHolds labels what store holds for names ("x v3, y v1").
func storeHolds(store cache.Store, names []string) string {
	var out []string
	for _, n := range names {
		obj, exists, err := store.GetByKey("default/" + n)
		must(err)
		if !exists {
			out = append(out, n+" absent")
			continue
		}
		out = append(out, objLabel(obj))
	}
	return strings.Join(out, ", ")
}

// trail is the lines a run collects from the informer's goroutines, once started.
type trail struct {
	mu    sync.Mutex
	on    bool
	lines []string
}

func (l *trail) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.on {
		l.lines = append(l.lines, fmt.Sprintf(format, args...))
	}
}

func (l *trail) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = true
}

func (l *trail) logging() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.on
}

func (l *trail) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// handlerLog is a handler that logs every call on a ConfigMap other than the gate.
func handlerLog(l *trail, store func() cache.Store, names []string) cache.ResourceEventHandlerFuncs {
	holds := func() string {
		if store == nil {
			return ""
		}
		return "; the store holds " + storeHolds(store(), names)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { l.add("handler: OnAdd %s%s", objLabel(obj), holds()) },
		UpdateFunc: func(o, n any) {
			if n.(*corev1.ConfigMap).Name != "gate" {
				l.add("handler: OnUpdate old %s, new %s%s", objLabel(o), objLabel(n), holds())
			}
		},
		DeleteFunc: func(obj any) { l.add("handler: OnDelete %s%s", objLabel(obj), holds()) },
	}
}

// drive runs the writes of r against a synced informer whose processing is held until hold
// is closed.
func (r heldRun) drive(client *fake.Clientset, synced func() bool, l *trail, hold chan struct{}) {
	if !common.WaitUntil(10*time.Second, synced) {
		panic("the informer never synced")
	}
	l.start()
	ctx := context.Background()
	cms := client.CoreV1().ConfigMaps("default")
	_, err := cms.Update(ctx, cm("gate", 2), metav1.UpdateOptions{})
	must(err)
	synctest.Wait() // the processing is held on the gate
	for _, o := range r.writes {
		_, err := cms.Update(ctx, o, metav1.UpdateOptions{})
		must(err)
		synctest.Wait()
	}
	close(hold)
	synctest.Wait()
}

// shared runs r on a shared informer: its processing is held in the store's index function,
// which logs the objects it is called with (each store write calls it with the old object,
// then the new); the handler runs on the informer's listener goroutine and logs its calls.
func (r heldRun) shared(w *writer) {
	client := r.client()
	l := &trail{}
	hold := make(chan struct{})
	index := func(obj any) ([]string, error) {
		c := obj.(*corev1.ConfigMap)
		if c.Name == "gate" {
			if c.Data["v"] == "2" && l.logging() {
				<-hold
			}
		} else {
			l.add("index %s", objLabel(c))
		}
		return []string{c.Data["v"]}, nil
	}
	informer := cache.NewSharedIndexInformer(common.FakeListWatch(client, &corev1.ConfigMap{}, nil), &corev1.ConfigMap{}, 0, cache.Indexers{"v": index})
	if r.transform != nil {
		must(informer.SetTransform(r.transform))
	}
	_, err := informer.AddEventHandler(handlerLog(l, nil, r.names()))
	must(err)
	stop := common.Run(informer.RunWithContext)
	defer stop()
	r.drive(client, informer.HasSynced, l, hold)
	var indexed, handled []string
	for _, line := range l.take() {
		if s, ok := strings.CutPrefix(line, "index "); ok {
			indexed = append(indexed, s)
		} else {
			handled = append(handled, line)
		}
	}
	w.printf("shared informer (NewSharedIndexInformer; its handlers run on the listener's goroutine):")
	w.printf("  held on the gate: %s", r.describeWrites())
	w.printf("  the store's index function saw (each write: the old object, then the new): %s", strings.Join(indexed, ", "))
	for _, h := range handled {
		w.printf("  %s", h)
	}
	w.printf("  the store afterwards: %s", storeHolds(informer.GetStore(), r.names()))
}

// inline runs r on the informer of cache.NewInformerWithOptions, whose handler runs on the
// processing goroutine itself: it is held in the handler's call for the gate, and every other
// call logs what the store holds when it runs.
func (r heldRun) inline(w *writer) {
	client := r.client()
	l := &trail{}
	hold := make(chan struct{})
	var store cache.Store
	logged := handlerLog(l, func() cache.Store { return store }, r.names())
	handler := logged
	handler.UpdateFunc = func(o, n any) {
		if c := n.(*corev1.ConfigMap); c.Name == "gate" && c.Data["v"] == "2" && l.logging() {
			<-hold
			return
		}
		logged.UpdateFunc(o, n)
	}
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: common.FakeListWatch(client, &corev1.ConfigMap{}, nil),
		ObjectType:    &corev1.ConfigMap{},
		Handler:       handler,
		Transform:     r.transform,
	})
	stop := common.Run(ctrl.RunWithContext)
	defer stop()
	r.drive(client, ctrl.HasSynced, l, hold)
	w.printf("informer of NewInformerWithOptions (its handler runs on the processing goroutine):")
	w.printf("  held on the gate: %s", r.describeWrites())
	for _, h := range l.take() {
		w.printf("  %s", h)
	}
	w.printf("  the store afterwards: %s", storeHolds(store, r.names()))
}

const heldHow = "in a synctest bubble per informer, over kubernetes/fake.NewSimpleClientset: ConfigMaps gate and the others at v1, the informer started and synced; gate updated to v2, and the informer's processing held on it (the shared informer: in its store's index function; the other: in its handler); then the writes, each after synctest.Wait (the reflector has queued the one before); then the processing released and let run until nothing moves. Logged from the moment gate is updated"

func init() {
	registerSince(37, "fifo_batch_boundaries", "{client-go} atomic RealFIFO built with the options an informer gives it (AtomicEvents, UnlockWhileProcessing, EmitDeltaTypeBookmark), PopBatch after Close until it reports closed: updates a v2, b v2, a v3, c v2 (a key repeats); then on a RealFIFO whose key function fails for broken once armed (armed after the updates: the FIFO computes a key when it queues an object, and may again when it pops), updates a v2, broken v2, c v2", func(t *testing.T, w *writer) {
		repeated := atomicFIFO()
		for _, o := range []*corev1.ConfigMap{cm("a", 2), cm("b", 2), cm("a", 3), cm("c", 2)} {
			must(repeated.Update(o))
		}
		printPops(w, "a repeats: updates a v2, b v2, a v3, c v2", drainBatches(repeated))
		var armed atomic.Bool
		broken := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{KeyFunction: keyFailsFor("broken", &armed), AtomicEvents: true, UnlockWhileProcessing: true, EmitDeltaTypeBookmark: true})
		for _, o := range []*corev1.ConfigMap{cm("a", 2), cm("broken", 2), cm("c", 2)} {
			must(broken.Update(o))
		}
		armed.Store(true)
		printPops(w, "no key for broken: updates a v2, broken v2, c v2", drainBatches(broken))
	})

	registerSince(37, "informer_batch_same_object", "{client-go}, two informers "+heldHow+". Writes: update x v2, update x v3, so that one object is updated twice behind the held gate. Each handler call's old and new object; the shared informer's store writes, seen by an index function; and, where the handler runs on the processing goroutine, what the store holds when it runs (a shared informer's handler runs on another goroutine, where that is a race)", func(t *testing.T, w *writer) {
		r := heldRun{writes: []*corev1.ConfigMap{cm("x", 2), cm("x", 3)}}
		printGates(w)
		common.Bubble(t, func(t *testing.T) { r.shared(w) })
		common.Bubble(t, func(t *testing.T) { r.inline(w) })
	})

	registerSince(37, "informer_batch_key_error", "{client-go}, two informers "+heldHow+". Writes: update x v2, update broken v2, update y v2, with a transform that turns broken at v2 into an object without metadata (the FIFO keys an object before transforming it, so the delta is queued; its key fails from then on). Each handler call, the shared informer's store writes, and where the handler runs on the processing goroutine what the store holds when it runs", func(t *testing.T, w *writer) {
		w.note("the error the processing of a batch returns (v0.37: the store's transaction error; v0.38: the key errors joined) is dropped by the informer's processing loop, so no line can show it")
		r := heldRun{writes: []*corev1.ConfigMap{cm("x", 2), cm("broken", 2), cm("y", 2)}, transform: breakAtV2("broken")}
		printGates(w)
		common.Bubble(t, func(t *testing.T) { r.shared(w) })
		common.Bubble(t, func(t *testing.T) { r.inline(w) })
	})

	registerSince(37, "store_transaction_repeated_key", "{client-go} cache.NewIndexer(MetaNamespaceKeyFunc) with an index function that logs the objects it is called with (each write: the old object, then the new; an add, the new alone); it holds x v1; then one Transaction (the store's TransactionStore, which an informer's batch uses): update x v2, update x v3, add y v1", func(t *testing.T, w *writer) {
		l := &trail{}
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{"v": func(obj any) ([]string, error) {
			l.add("%s", objLabel(obj))
			return []string{obj.(*corev1.ConfigMap).Data["v"]}, nil
		}})
		must(idx.Add(cm("x", 1)))
		l.start()
		err := idx.(cache.TransactionStore).Transaction(
			cache.Transaction{Type: cache.TransactionTypeUpdate, Object: cm("x", 2)},
			cache.Transaction{Type: cache.TransactionTypeUpdate, Object: cm("x", 3)},
			cache.Transaction{Type: cache.TransactionTypeAdd, Object: cm("y", 1)},
		)
		w.printf("transaction: update x v2, update x v3, add y v1; error: %v", err != nil)
		w.printf("the index function saw: %s", strings.Join(l.take(), ", "))
		w.printf("the store afterwards: %s", storeHolds(idx, []string{"x", "y"}))
		for _, v := range []string{"1", "2", "3"} {
			keys, err := idx.IndexKeys("v", v)
			must(err)
			w.printf("index v=%s: %v", v, keys)
		}
	})
}
