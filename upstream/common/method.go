package common

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// ---------------------------------------------------------------------------------------
// Chapter 05 (the port's lab::method): the essay's check on the fake.
// ---------------------------------------------------------------------------------------

// methodRow is one run of chapter 05's check (the port's lab::method::Row).
type methodRow struct {
	updates, rvIndistinguishable, rvCheckViolations, payloadCheckViolations, rvChangedPasses int
}

func rvOf(cm *corev1.ConfigMap) int {
	n, _ := strconv.Atoi(cm.ResourceVersion)
	return n
}

func nOf(cm *corev1.ConfigMap) int {
	n, _ := strconv.Atoi(cm.Data["n"])
	return n
}

func methodCM(i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: Namespace}, Data: map[string]string{"n": strconv.Itoa(i)}}
}

// UpdatePredicate is a predicate's verdict on an update event (old, new): controller-runtime's
// ResourceVersionChangedPredicate, handed in by a recorder that links controller-runtime.
type UpdatePredicate func(old, new *corev1.ConfigMap) bool

// methodCheck is the port's lab::method::run on the fake: ConfigMap c at n = 0; an informer
// with resync period resync; a handler registered with a resync period of zero that, on each
// update, reads the object back from the cache and compares resourceVersions ("" as 0) and n,
// and asks rvChanged (when not nil); after hour 10.5, five writes n = 1..5, one second apart.
// stamp: each write carries a fresh resourceVersion.
func methodCheck(resync time.Duration, stamp bool, rvChanged UpdatePredicate) methodRow {
	client := SimpleClientset.New(methodCM(0))
	informer := NewInformer(client, &corev1.ConfigMap{}, resync, nil)
	var mu sync.Mutex
	var row methodRow
	_, err := informer.AddEventHandlerWithResyncPeriod(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
		old, new := o.(*corev1.ConfigMap), n.(*corev1.ConfigMap)
		obj, _, _ := informer.GetIndexer().Get(new)
		cached := obj.(*corev1.ConfigMap)
		mu.Lock()
		defer mu.Unlock()
		row.updates++
		if rvOf(old) == rvOf(new) {
			row.rvIndistinguishable++
		}
		if rvOf(cached) < rvOf(new) {
			row.rvCheckViolations++
		}
		if nOf(cached) < nOf(new) {
			row.payloadCheckViolations++
		}
		if rvChanged != nil && rvChanged(old, new) {
			row.rvChangedPasses++
		}
	}}, 0)
	Must(err)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		informer.RunWithContext(ctx)
		close(stopped)
	}()
	t0 := time.Now()
	time.Sleep(time.Until(t0.Add(10*time.Hour + 30*time.Minute)))
	for i := 1; i <= 5; i++ {
		synctest.Wait()
		c := methodCM(i)
		if stamp {
			c.ResourceVersion = strconv.Itoa(1000 + i)
		}
		_, err := client.CoreV1().ConfigMaps(Namespace).Update(ctx, c, metav1.UpdateOptions{})
		Must(err)
		time.Sleep(time.Second)
	}
	synctest.Wait()
	cancel()
	<-stopped
	mu.Lock()
	defer mu.Unlock()
	return row
}

// overflow is the port's ch05_overflow on fk: a watch in default that nobody reads, and
// creates of c1, c2, … until one panics.
func overflow(fk Fake, printf Printf) {
	ctx := context.Background()
	client := fk.New()
	cms := client.CoreV1().ConfigMaps(Namespace)
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	Must(err)
	defer w.Stop()
	for i := 1; i <= 1000; i++ {
		c := methodCM(i)
		c.Name = fmt.Sprintf("c%d", i)
		var panicked any
		func() {
			defer func() { panicked = recover() }()
			_, err = cms.Create(ctx, c, metav1.CreateOptions{})
		}()
		if panicked != nil {
			printf("  writes 1..=%d: accepted, buffered unread", i-1)
			printf("  write %d: the writer panicked: %q", i, fmt.Sprint(panicked))
			break
		}
		Must(err)
	}
	l, err := cms.List(ctx, metav1.ListOptions{})
	Must(err)
	printf("  objects stored afterwards: %d", len(l.Items))
}

// MethodHow says how chapter 05's lines are obtained; withPredicate: controller-runtime's
// predicate is asked too.
func MethodHow(withPredicate bool) string {
	predicate := ""
	if withPredicate {
		predicate = " (and controller-runtime " + ControllerRuntime() + "'s ResourceVersionChangedPredicate)"
	}
	return "client-go " + ClientGo() + " on fake.NewSimpleClientset" + predicate + ", in a synctest bubble per run: the port's lab::method. The check: ConfigMap c at n = 0, a SharedIndexInformer with the given resync period, one handler registered with a resync period of zero that reads each update's object back from the indexer and compares resourceVersions (\"\" as 0) and n; after hour 10.5, five writes n = 1..5 one second apart, with resourceVersions as the fake leaves them (none) or stamped fresh on each write, as a server would. The overflow: a watch nobody reads on each fake, then creates of c1, c2, …"
}

// MethodScenario records chapter 05's runs; with rvChanged nil (no controller-runtime linked)
// the predicate's count is left out of the lines, and a note says so.
func MethodScenario(t *testing.T, w *Writer, rvChanged UpdatePredicate) {
	if rvChanged == nil {
		w.Note("no controller-runtime is linked: its ResourceVersionChangedPredicate is not asked, and the rv_changed_predicate_passes count is left out of the lines")
	}
	for _, c := range []struct {
		label  string
		resync time.Duration
		stamp  bool
	}{
		{"informer resync 0, resourceVersions as the fake leaves them", 0, false},
		{"informer resync 0, each write stamped with a fresh resourceVersion", 0, true},
		{"informer resync 10h, resourceVersions as the fake leaves them", 10 * time.Hour, false},
		{"informer resync 10h, each write stamped with a fresh resourceVersion", 10 * time.Hour, true},
	} {
		var r methodRow
		Bubble(t, func(t *testing.T) { r = methodCheck(c.resync, c.stamp, rvChanged) })
		line := fmt.Sprintf("%s: %d of 5 updates reached the handler; rv_indistinguishable %d, rv_check_violations %d, payload_check_violations %d",
			c.label, r.updates, r.rvIndistinguishable, r.rvCheckViolations, r.payloadCheckViolations)
		if rvChanged != nil {
			line += fmt.Sprintf(", rv_changed_predicate_passes %d", r.rvChangedPasses)
		}
		w.Printf("%s", line)
	}
	for _, fk := range []Fake{SimpleClientset, FieldManagedClientset} {
		w.Printf("%s, a watch nobody reads:", fk)
		overflow(fk, w.Printf)
	}
}

// ---------------------------------------------------------------------------------------
// Chapter 02's done without forget, with the chapter's numbers.
// ---------------------------------------------------------------------------------------

// doneWithoutForget is chapter 02's hand-written worker loop: twelve failures in a row, a
// success (with or without Forget), a day of quiet, one failure; what the success kept, and
// how long the retry after that failure waited.
func doneWithoutForget(forget bool) (kept int, waited time.Duration) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	const key = "default/web"
	q.Add(key)
	last := time.Now()
	for n := 1; n <= 12; n++ {
		item, _ := q.Get()
		if n > 1 && time.Since(last) != 5*time.Millisecond<<(n-2) {
			panic(fmt.Sprintf("failure %d came %v after the last, not %v", n, time.Since(last), 5*time.Millisecond<<(n-2)))
		}
		last = time.Now()
		q.AddRateLimited(item)
		q.Done(item)
	}
	item, _ := q.Get()
	if forget {
		q.Forget(item)
	}
	q.Done(item)
	kept = q.NumRequeues(key)
	time.Sleep(24 * time.Hour)
	q.Add(key)
	item, _ = q.Get()
	q.AddRateLimited(item)
	q.Done(item)
	failed := time.Now()
	item, _ = q.Get()
	q.Done(item)
	return kept, time.Since(failed)
}

// DoneWithoutForgetScenario records chapter 02's table.
func DoneWithoutForgetScenario(t *testing.T, w *Writer) {
	w.Printf("after a success          failures kept  next failure waits")
	for _, forget := range []bool{false, true} {
		var kept int
		var waited time.Duration
		Bubble(t, func(t *testing.T) { kept, waited = doneWithoutForget(forget) })
		name := "done, no forget"
		if forget {
			name = "done and forget"
		}
		w.Printf("%-24s %13d  %v", name, kept, waited)
	}
}
