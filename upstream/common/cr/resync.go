package cr

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"controlloop/upstream/common"
)

// The resync timeline of chapter 04 (the port's lab::resync::timeline), on the fake: one
// ConfigMap "w" stands for the chapter's Widget, its spec a data key "color", its generation
// set by the writer as an API server would bump it (the fake keeps what it is given).

// ResyncSetup is what one timeline varies.
type ResyncSetup struct {
	Predicate    bool          // GenerationChangedPredicate on the watch
	Live         bool          // the reconciler reads the server (the fake), not the cache
	RequeueAfter time.Duration // the reconciler's Result{RequeueAfter} (0: Result{})
}

// widget is a ConfigMap w carrying color at generation gen.
func widget(name, color string, gen int64) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: common.Namespace, Generation: gen},
		Data:       map[string]string{"color": color},
	}
}

type resyncReconcile struct {
	at          time.Duration
	name, color string
}

// ResyncReport is what a timeline saw.
type ResyncReport struct {
	Period     []time.Duration // the resync periods controller-runtime gave its informers
	Reconciles []resyncReconcile
	// The update counts of a handler beside the controller's.
	Updates, PayloadChanged, OldEqualsNew, SamePointer int
	GenerationChangedPasses                            int
	OnTheServer, InTheCache                            []string
	ListCalls, WatchCalls                              int
}

// hoursIn prints d in hours as the port does (up to four decimals, trailing zeros dropped),
// or as k·P when it is k resync periods (P, 2·P, …), which jitter from run to run.
func hoursIn(d time.Duration, periods []time.Duration) string {
	for i, p := range periods {
		if p <= 0 {
			continue
		}
		k := float64(d) / float64(p)
		if k >= 1 && math.Abs(k-math.Round(k)) < 1e-9 {
			name := "P"
			if len(periods) > 1 {
				name = fmt.Sprintf("P%d", i+1)
			}
			if math.Round(k) == 1 {
				return name
			}
			return fmt.Sprintf("%d·%s", int(math.Round(k)), name)
		}
	}
	return common.Float(math.Round(d.Hours()*10000) / 10000)
}

// Reconciled is the port's Report::reconciled: "hour name color", runs one hour apart folded
// into "from..=to".
func (r ResyncReport) Reconciled() []string {
	type run struct {
		from, to time.Duration
		r        resyncReconcile
	}
	var out []run
	for _, x := range r.Reconciles {
		if n := len(out); n > 0 && out[n-1].r.name == x.name && out[n-1].r.color == x.color && x.at == out[n-1].to+time.Hour {
			out[n-1].to = x.at
			continue
		}
		out = append(out, run{x.at, x.at, x})
	}
	var s []string
	for _, o := range out {
		if o.from == o.to {
			s = append(s, fmt.Sprintf("%s %s %s", hoursIn(o.from, r.Period), o.r.name, o.r.color))
		} else {
			s = append(s, fmt.Sprintf("%s..=%s %s %s", hoursIn(o.from, r.Period), hoursIn(o.to, r.Period), o.r.name, o.r.color))
		}
	}
	return s
}

// ResyncTimeline runs chapter 04's timeline (in virtual hours) on controller-runtime:
//
//	0     w exists at generation 7, red; the cache lists it
//	0.5   a spec change: green, generation 8
//	21.5  two writes whose watch events are lost: w blue (generation 9), w2 created blue
//	35.5  stop
//
// with the cache's SyncPeriod at 10 h (jittered by controller-runtime).
func ResyncTimeline(setup ResyncSetup) ResyncReport {
	t0 := time.Now()
	at := func(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }
	client := common.SimpleClientset.New(widget("w", "red", 7))
	cms := client.CoreV1().ConfigMaps(common.Namespace)
	dropper := &common.Dropper{}
	var mu sync.Mutex
	var rep ResyncReport
	period := 10 * time.Hour
	reconciler := func(ctx context.Context, cache *CRCache, r reconcile.Request) (reconcile.Result, error) {
		var cm *corev1.ConfigMap
		if setup.Live {
			got, err := cms.Get(ctx, r.Name, metav1.GetOptions{})
			if err == nil {
				cm = got
			}
		} else {
			cm = cache.GetConfigMap(ctx, r.Name)
		}
		color := "absent"
		if cm != nil {
			color = cm.Data["color"]
		}
		mu.Lock()
		rep.Reconciles = append(rep.Reconciles, resyncReconcile{time.Since(t0), r.Name, color})
		mu.Unlock()
		return reconcile.Result{RequeueAfter: setup.RequeueAfter}, nil
	}
	o := CROptions{Workers: 1, SyncPeriod: &period, Dropper: dropper}
	if setup.Predicate {
		o.Predicates = append(o.Predicates, countingPredicate(&mu, &rep.GenerationChangedPasses))
	}
	c := StartCRController(client, o, reconciler)
	// Beside the controller's handler, one that records what each update carries.
	inf, err := c.Cache.GetInformer(context.Background(), &corev1.ConfigMap{})
	common.Must(err)
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(old, new any) {
		o, n := old.(*corev1.ConfigMap), new.(*corev1.ConfigMap)
		mu.Lock()
		defer mu.Unlock()
		rep.Updates++
		if o.Data["color"] != n.Data["color"] || o.Generation != n.Generation {
			rep.PayloadChanged++
		} else {
			rep.OldEqualsNew++
		}
		if o == n {
			rep.SamePointer++
		}
	}})
	common.Must(err)
	sleepUntil := func(t time.Time) {
		time.Sleep(time.Until(t))
		synctest.Wait()
	}
	ctx := context.Background()
	sleepUntil(at(0.5))
	_, err = cms.Update(ctx, widget("w", "green", 8), metav1.UpdateOptions{})
	common.Must(err)
	sleepUntil(at(21.5))
	dropper.Drop(2) // the next two writes' watch events are lost
	_, err = cms.Update(ctx, widget("w", "blue", 9), metav1.UpdateOptions{})
	common.Must(err)
	_, err = cms.Create(ctx, widget("w2", "blue", 1), metav1.CreateOptions{})
	common.Must(err)
	sleepUntil(at(35.5))
	var cached corev1.ConfigMapList
	common.Must(c.Cache.List(ctx, &cached))
	c.Stop()
	rep.ListCalls, rep.WatchCalls = countVerb(client.Actions(), "list"), countVerb(client.Actions(), "watch")
	rep.Period = c.Cache.ResyncPeriods()
	// The run stops at 35.5 h: a reconcile due at that instant is not part of it.
	mu.Lock()
	for i, r := range rep.Reconciles {
		if r.at >= 35*time.Hour+30*time.Minute {
			rep.Reconciles = rep.Reconciles[:i]
			break
		}
	}
	mu.Unlock()
	l, err := cms.List(ctx, metav1.ListOptions{})
	common.Must(err)
	for _, cm := range l.Items {
		rep.OnTheServer = append(rep.OnTheServer, fmt.Sprintf("%s %s generation %d", cm.Name, cm.Data["color"], cm.Generation))
	}
	for _, cm := range cached.Items {
		rep.InTheCache = append(rep.InTheCache, fmt.Sprintf("%s %s generation %d", cm.Name, cm.Data["color"], cm.Generation))
	}
	return rep
}

// countingPredicate is GenerationChangedPredicate, counting the updates it lets through.
func countingPredicate(mu *sync.Mutex, passes *int) predicate.TypedPredicate[*corev1.ConfigMap] {
	inner := predicate.TypedGenerationChangedPredicate[*corev1.ConfigMap]{}
	return predicate.TypedFuncs[*corev1.ConfigMap]{
		UpdateFunc: func(e event.TypedUpdateEvent[*corev1.ConfigMap]) bool {
			ok := inner.Update(e)
			if ok {
				mu.Lock()
				*passes++
				mu.Unlock()
			}
			return ok
		},
	}
}

func countVerb[A interface{ GetVerb() string }](actions []A, verb string) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

// OwnedTimeline is chapter 04's owned watch: a controller for ConfigMap w with
// GenerationChangedPredicate, that also watches the Pod it owns (what Owns(&Pod{}) registers:
// EnqueueRequestForOwner, no predicate), no writes at all, 35 hours. The Pod's informer has a
// resync period of its own, jittered separately.
func OwnedTimeline() (hoursAfter0 []string, periods []time.Duration) {
	t0 := time.Now()
	owner := widget("w", "red", 7)
	owner.UID = types.UID("uid-w")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w-pod", Namespace: common.Namespace, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: "w", UID: owner.UID, Controller: ptr.To(true),
	}}}}
	client := common.SimpleClientset.New(owner, pod)
	period := 10 * time.Hour
	cache, err := NewCRCache(client, &period, nil)
	common.Must(err)
	var mu sync.Mutex
	var at []time.Duration
	c, err := controller.NewTypedUnmanaged("owner", controller.TypedOptions[reconcile.Request]{
		SkipNameValidation: ptr.To(true),
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			mu.Lock()
			at = append(at, time.Since(t0))
			mu.Unlock()
			return reconcile.Result{}, nil
		}),
	})
	common.Must(err)
	common.Must(c.Watch(source.Kind(cache, &corev1.ConfigMap{}, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{},
		predicate.TypedGenerationChangedPredicate[*corev1.ConfigMap]{})))
	common.Must(c.Watch(source.Kind(cache, &corev1.Pod{}, handler.TypedEnqueueRequestForOwner[*corev1.Pod](clientgoscheme.Scheme, cache.mapper, &corev1.ConfigMap{}, handler.OnlyControllerOwner()))))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = c.Start(ctx) }()
	synctest.Wait()
	go func() { defer wg.Done(); _ = cache.Start(ctx) }()
	time.Sleep(35 * time.Hour)
	synctest.Wait()
	cancel()
	wg.Wait()
	periods = cache.ResyncPeriods()
	podPeriod := []time.Duration{cache.ByKind["Pod"]}
	mu.Lock()
	defer mu.Unlock()
	for _, d := range at {
		if d > time.Minute { // hour 0: the initial lists' reconciles
			hoursAfter0 = append(hoursAfter0, strings.ReplaceAll(hoursIn(d, podPeriod), "P", "P(Pod)"))
		}
	}
	return hoursAfter0, periods
}

// ResyncHow says how the resync lines are obtained.
func ResyncHow() string {
	return CRWho() + "; the cache's SyncPeriod 10h, which controller-runtime jitters per informer (pkg/cache/internal/informers.go: a factor in [0.9, 1.1) from math/rand, not seedable from outside): times that are k resync periods print as k·P, P's measured value is in the note; chapter 04's timeline in a synctest bubble (virtual hours), on fake.NewSimpleClientset: ConfigMap w (data.color for the spec, metadata.generation set by the writer as an API server would bump it) red at generation 7; at 0.5h green, generation 8; at 21.5h two writes whose watch events are withheld from the informer (blue at generation 9, and w2 created); stop at 35.5h (a reconcile due at that instant is left out)"
}

// ResyncScenario records chapter 04's runs.
func ResyncScenario(t *testing.T, w *common.Writer) {
	var periods []string
	inRange := true
	run := func(setup ResyncSetup) ResyncReport {
		var rep ResyncReport
		common.Bubble(t, func(t *testing.T) { rep = ResyncTimeline(setup) })
		for _, p := range rep.Period {
			periods = append(periods, p.String())
			inRange = inRange && p >= 9*time.Hour && p < 11*time.Hour
		}
		return rep
	}
	faithful := run(ResyncSetup{Predicate: true})
	w.Printf("GenerationChangedPredicate, reading the cache:")
	w.Printf("  on_update: total %d, payload_changed %d, old_equals_new %d, same_pointer %d, generation_changed_passes %d",
		faithful.Updates, faithful.PayloadChanged, faithful.OldEqualsNew, faithful.SamePointer, faithful.GenerationChangedPasses)
	w.Printf("  reconciled: %s", strings.Join(faithful.Reconciled(), ", "))
	w.Printf("  on the server: %s", strings.Join(faithful.OnTheServer, ", "))
	w.Printf("  in the cache: %s", strings.Join(faithful.InTheCache, ", "))
	w.Printf("  fake clientset calls: list %d, watch %d", faithful.ListCalls, faithful.WatchCalls)
	noPred := run(ResyncSetup{})
	w.Printf("no predicate, reading the cache: %s", strings.Join(noPred.Reconciled(), ", "))
	for _, c := range []struct {
		label string
		setup ResyncSetup
	}{
		{"cache, RequeueAfter 1h", ResyncSetup{Predicate: true, RequeueAfter: time.Hour}},
		{"server, RequeueAfter 1h", ResyncSetup{Predicate: true, Live: true, RequeueAfter: time.Hour}},
		{"server, no requeue", ResyncSetup{Predicate: true, Live: true}},
	} {
		r := run(c.setup)
		w.Printf("remedy, %-24s %s; generation_changed_passes %d", c.label+":", strings.Join(r.Reconciled(), ", "), r.GenerationChangedPasses)
	}
	var owned []string
	var ownedPeriods []time.Duration
	common.Bubble(t, func(t *testing.T) { owned, ownedPeriods = OwnedTimeline() })
	for _, p := range ownedPeriods {
		periods = append(periods, p.String())
		inRange = inRange && p >= 9*time.Hour && p < 11*time.Hour
	}
	w.Printf("owned Pod (EnqueueRequestForOwner, no predicate), no writes: reconciles after hour 0 at %s (P(Pod): the Pod informer's resync period)", strings.Join(owned, ", "))
	w.Printf("every resync period controller-runtime gave an informer is in [9h, 11h): %v", inRange)
	w.Note("resync periods measured in this recording, informer by informer (jittered, differ per run): %s", strings.Join(periods, ", "))
}
