package common

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

func init() {
	// The scenarios print what they observe; upstream's logs would only be noise.
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
}

// Namespace and Object: the storms write ConfigMap default/controlloop-burst, as the port's
// lab::rig does.
const (
	Namespace = "default"
	Object    = "controlloop-burst"
)

// ConfigMap is default/name carrying data.value = value.
func ConfigMap(name string, value int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Data:       map[string]string{"value": strconv.Itoa(value)},
	}
}

// ValueOf is data.value of a ConfigMap, -1 if it has none.
func ValueOf(cm *corev1.ConfigMap) int {
	if cm == nil {
		return -1
	}
	v, err := strconv.Atoi(cm.Data["value"])
	if err != nil {
		return -1
	}
	return v
}

// Fake names one of client-go's fake clientsets.
type Fake int

const (
	// SimpleClientset is kubernetes/fake.NewSimpleClientset: objects stored as given.
	SimpleClientset Fake = iota
	// FieldManagedClientset is kubernetes/fake.NewClientset: the same tracker behind
	// server-side-apply field management.
	FieldManagedClientset
)

func (f Fake) String() string {
	if f == FieldManagedClientset {
		return "fake.NewClientset"
	}
	return "fake.NewSimpleClientset"
}

// New builds the fake holding objs.
func (f Fake) New(objs ...runtime.Object) *fake.Clientset {
	if f == FieldManagedClientset {
		return fake.NewClientset(objs...)
	}
	return fake.NewSimpleClientset(objs...)
}

// Dropper withholds watch events, as an event lost between the server and the informer:
// Drop(n) makes every watch opened through a FakeListWatch skip the next n events.
type Dropper struct {
	mu      sync.Mutex
	pending int
	Dropped int
}

// Drop arms the dropper for the next n events.
func (d *Dropper) Drop(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pending += n
}

func (d *Dropper) take() bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending > 0 {
		d.pending--
		d.Dropped++
		return true
	}
	return false
}

// droppingWatch forwards a watch's events except those the Dropper takes.
type droppingWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newDroppingWatch(inner watch.Interface, d *Dropper) watch.Interface {
	w := &droppingWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		for ev := range inner.ResultChan() {
			if (ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted) && d.take() {
				continue
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *droppingWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}
func (w *droppingWatch) ResultChan() <-chan watch.Event { return w.out }

// fakeListWatch lists and watches ConfigMaps or Pods on a fake clientset, and says, as
// informer-gen's informers do for the fake, that it cannot stream lists.
type fakeListWatch struct {
	toolscache.ListWatch
}

func (fakeListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// FakeListWatch is a ListerWatcher of obj's kind (ConfigMap or Pod) in every namespace of
// client; with a Dropper, its watches lose the events the dropper takes.
func FakeListWatch(client kubernetes.Interface, obj runtime.Object, d *Dropper) toolscache.ListerWatcher {
	var list func(context.Context, metav1.ListOptions) (runtime.Object, error)
	var watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)
	switch obj.(type) {
	case *corev1.ConfigMap:
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().ConfigMaps("").List(ctx, o)
		}
		watchFn = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().ConfigMaps("").Watch(ctx, o)
		}
	case *corev1.Pod:
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Pods("").List(ctx, o)
		}
		watchFn = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Pods("").Watch(ctx, o)
		}
	default:
		panic(fmt.Sprintf("FakeListWatch: no %T", obj))
	}
	return &fakeListWatch{toolscache.ListWatch{
		ListWithContextFunc: list,
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := watchFn(ctx, o)
			if err != nil || d == nil {
				return w, err
			}
			return newDroppingWatch(w, d), nil
		},
	}}
}

// NewInformer is a shared index informer over the fake, as informer-gen builds one.
func NewInformer(client kubernetes.Interface, obj runtime.Object, resync time.Duration, d *Dropper) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(FakeListWatch(client, obj, d), obj, resync, toolscache.Indexers{
		toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc,
	})
}
