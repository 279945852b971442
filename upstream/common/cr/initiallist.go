package cr

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"controlloop/upstream/common"
)

// reconcileLog is one reconcile: which object, when it started, the value it read.
type reconcileLog struct {
	name  string
	at    time.Time
	value int
}

// StormAndInitialList is chapter 06's last block (the port's
// lab::burst::priority::storm_and_initial_list): five objects and the storm's one exist
// before the controller starts, so all six come from its informer's initial list; once the
// first reconcile has started, the storm's object is written 200 times, 1 ms apart, behind a
// 20 ms reconciler and one worker. stamp: each write carries a fresh resourceVersion, as an API
// server's would (the fake sets none, so without it old and new resourceVersions are equal).
func StormAndInitialList(stamp bool, delay time.Duration, printf common.Printf) {
	const others = 5
	names := []string{common.Object}
	objs := []runtime.Object{common.ConfigMap(common.Object, 0)}
	for i := range others {
		n := fmt.Sprintf("other-%d", i)
		names = append(names, n)
		objs = append(objs, common.ConfigMap(n, 0))
	}
	client := common.SimpleClientset.New(objs...)
	var mu sync.Mutex
	var log []reconcileLog
	c := StartCRController(client, CROptions{Workers: 1}, func(ctx context.Context, cache *CRCache, r reconcile.Request) (reconcile.Result, error) {
		v := -1
		if cm := cache.GetConfigMap(ctx, r.Name); cm != nil {
			v = common.ValueOf(cm)
		}
		mu.Lock()
		log = append(log, reconcileLog{r.Name, time.Now(), v})
		mu.Unlock()
		time.Sleep(common.Essay.Cost)
		return reconcile.Result{}, nil
	})
	defer c.Stop()
	snapshot := func() []reconcileLog {
		mu.Lock()
		defer mu.Unlock()
		return append([]reconcileLog(nil), log...)
	}
	if !common.WaitUntil(30*time.Second, func() bool { return len(snapshot()) > 0 }) {
		panic("no reconcile started")
	}
	time.Sleep(delay)
	started := time.Now()
	for v := 1; v <= common.Essay.Writes; v++ {
		synctest.Wait()
		if p := common.WriteValue(client, v, stamp); p != "" {
			panic(p)
		}
		if v < common.Essay.Writes {
			time.Sleep(common.Essay.Gap)
		}
	}
	stormMS := time.Since(started).Milliseconds()
	lastRead := func(l []reconcileLog) int {
		for i := len(l) - 1; i >= 0; i-- {
			if l[i].name == common.Object {
				return l[i].value
			}
		}
		return -1
	}
	if !common.WaitUntil(time.Minute, func() bool {
		l := snapshot()
		seen := map[string]bool{}
		for _, r := range l {
			seen[r.name] = true
		}
		return lastRead(l) == common.Essay.Writes && len(seen) == len(names) && c.QueueLen() == 0
	}) {
		panic("the storm's object never read the last value, or an object was never reconciled")
	}
	time.Sleep(common.Essay.Cost + 2*time.Millisecond)
	synctest.Wait()
	l := snapshot()
	msOf := func(r reconcileLog) int64 {
		d := r.at.Sub(started).Milliseconds()
		if d < 0 {
			return 0
		}
		return d
	}
	during := map[string]int{}
	first := map[string]int64{}
	for _, r := range l {
		if msOf(r) < stormMS {
			during[r.name]++
		}
		if _, ok := first[r.name]; !ok && r.name != common.Object {
			first[r.name] = msOf(r)
		}
	}
	othersDuring := 0
	var firsts []int64
	for _, n := range names[1:] {
		othersDuring += during[n]
		firsts = append(firsts, first[n])
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	rv := "resourceVersions as the fake stores them (none: every update's old and new resourceVersion are equal)"
	if stamp {
		rv = "each write stamped with a fresh resourceVersion, as an API server's would be"
	}
	printf("queue: %s; %s; the storm began %v after the first reconcile started", QueueKind(c.Counts.queue), rv, delay)
	printf("storm: 200 writes to %s, 1 ms apart, over %d ms; 20 ms per reconcile, one worker", common.Object, stormMS)
	printf("reconciles started during the storm: %s %d, the %d other objects %d", common.Object, during[common.Object], others, othersDuring)
	printf("the other objects' first reconciles, ms after the storm began: %s", int64s(firsts))
	printf("%s's last reconcile read %d", common.Object, lastRead(l))
	printf("the handler's adds: %s", priorities(c.Adds()))
	var order []string
	for _, r := range l {
		order = append(order, r.name)
	}
	printf("reconciles in order: %s", runs(order))
}

func int64s(xs []int64) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// priorities summarises adds as "initial list: 6 at priority -100; later: 200 at priority …".
func priorities(adds []Add) string {
	var out []string
	var last string
	n := 0
	flush := func() {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d × %s", n, last))
		}
	}
	for _, a := range adds {
		p := "no priority"
		if a.Priority != nil {
			p = fmt.Sprintf("priority %d", *a.Priority)
		}
		name := "the storm's object"
		if a.Name != common.Object {
			name = "another object"
		}
		cur := name + " at " + p
		if cur != last {
			flush()
			last, n = cur, 0
		}
		n++
	}
	flush()
	return strings.Join(out, ", ")
}

// runs prints a sequence with repeats folded: "a, b ×3, c".
func runs(xs []string) string {
	var out []string
	for i := 0; i < len(xs); {
		j := i
		for j < len(xs) && xs[j] == xs[i] {
			j++
		}
		if j-i == 1 {
			out = append(out, xs[i])
		} else {
			out = append(out, fmt.Sprintf("%s ×%d", xs[i], j-i))
		}
		i = j
	}
	return strings.Join(out, ", ")
}

// StormAndInitialListHow says how the lines are obtained.
func StormAndInitialListHow() string {
	return CRWho() + " (here without the predicate: all six objects), in a synctest bubble; the port's lab::burst::priority::storm_and_initial_list: other-0..other-4 and controlloop-burst at value 0 on fake.NewSimpleClientset before the controller starts; once the first reconcile has started, 200 writes to controlloop-burst 1 ms apart (each after synctest.Wait), 20 ms reconciles, one worker; 'during the storm' counts reconciles that started less than the storm's span after its first write; four times: resourceVersions as the fake leaves them or stamped on each write, and the storm's first write at the instant the first reconcile started or 1 ms later (the port runs both; an earlier port block began its storm 1 ms late)"
}

// StormAndInitialListScenario records both runs.
func StormAndInitialListScenario(t *testing.T, w *common.Writer) {
	i := 0
	for _, stamp := range []bool{false, true} {
		for _, delay := range []time.Duration{0, time.Millisecond} {
			if i > 0 {
				w.Printf("")
			}
			i++
			common.Bubble(t, func(t *testing.T) { StormAndInitialList(stamp, delay, w.Printf) })
		}
	}
}
