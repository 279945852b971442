package clientgo

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"controlloop/upstream/common"
)

// capture is a features.VersionedRegistry that keeps the versioned table it is given.
type capture struct {
	specs map[features.Feature]features.VersionedSpecs
}

func (c *capture) AddVersioned(in map[features.Feature]features.VersionedSpecs) error {
	c.specs = in
	return nil
}

func preRelease(s features.FeatureSpec) string {
	switch s.PreRelease {
	case features.Alpha:
		return "Alpha"
	case features.Beta:
		return "Beta"
	case features.GA:
		return "GA"
	case features.Deprecated:
		return "Deprecated"
	}
	return string(s.PreRelease)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// modelled are the informer gates the port models (src/features); the rest of client-go's
// table is named in a header note.
var modelled = []features.Feature{
	features.AtomicFIFO, features.InOrderInformers, features.InOrderInformersBatchProcess,
	features.UnlockWhileProcessingFIFO, features.WatchListClient,
}

func init() {
	register("feature_gates", "{client-go}'s versioned table, obtained by running features.AddVersionedFeaturesToExistingFeatureGates, resolved at each emulated minor from 1.32 to 1.37, or to the linked release's own if newer, by component-base's rule (the last spec whose version <= the emulated one; none: PreAlpha, off); the 'standalone' lines are features.FeatureGates().Enabled in this binary", func(t *testing.T, w *writer) {
		c := &capture{}
		must(features.AddVersionedFeaturesToExistingFeatureGates(c))
		var others []string
		isModelled := map[features.Feature]bool{}
		for _, f := range modelled {
			isModelled[f] = true
		}
		for f := range c.specs {
			if !isModelled[f] {
				others = append(others, string(f))
			}
		}
		sort.Strings(others)
		w.note("gates in client-go's table the port does not model: %v", others)
		for minor := uint(32); minor <= uint(max(37, common.MinorNumber("k8s.io/client-go"))); minor++ {
			for _, f := range modelled {
				specs := append(features.VersionedSpecs{}, c.specs[f]...)
				sort.Slice(specs, func(i, j int) bool { return specs[i].Version.LessThan(specs[j].Version) })
				line := "PreAlpha default=off locked=no"
				for _, s := range specs {
					if s.Version.Major() == 1 && s.Version.Minor() <= minor {
						line = preRelease(s) + " default=" + onOff(s.Default) + " locked=" + yesNo(s.LockToDefault)
					}
				}
				w.printf("1.%d %s: %s", minor, f, line)
			}
		}
		for _, f := range modelled {
			w.printf("standalone %s: %s", f, onOff(features.FeatureGates().Enabled(f)))
		}
	})

	register("fake_clientset_resource_versions", "{client-go} kubernetes/fake.NewSimpleClientset, ConfigMaps in default", func(t *testing.T, w *writer) {
		ctx := context.Background()
		cms := fake.NewSimpleClientset().CoreV1().ConfigMaps("default")
		list := func(what string) {
			l, err := cms.List(ctx, metav1.ListOptions{})
			must(err)
			var items []string
			for _, i := range l.Items {
				items = append(items, i.Name+" rv "+quote(i.ResourceVersion))
			}
			w.printf("%s: list rv %s, items %v", what, quote(l.ResourceVersion), items)
		}
		list("empty")
		a, err := cms.Create(ctx, cm("a", 1), metav1.CreateOptions{})
		must(err)
		w.printf("create a: returned rv %s", quote(a.ResourceVersion))
		list("after create a")
		stale := cm("a", 2)
		stale.ResourceVersion = "stale"
		a, err = cms.Update(ctx, stale, metav1.UpdateOptions{})
		must(err)
		w.printf("update a with rv \"stale\": accepted, returned rv %s", quote(a.ResourceVersion))
		list("after update a")
		_, err = cms.Create(ctx, cm("b", 1), metav1.CreateOptions{})
		must(err)
		list("after create b")
		must(cms.Delete(ctx, "a", metav1.DeleteOptions{}))
		list("after delete a")
		for _, rv := range []string{"", "3", "4"} {
			wi, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			must(err)
			var evs []string
		read:
			for {
				select {
				case ev := <-wi.ResultChan():
					evs = append(evs, string(ev.Type)+" "+ev.Object.(*corev1.ConfigMap).Name)
				default:
					break read
				}
			}
			wi.Stop()
			w.printf("watch from rv %s replays %v", quote(rv), evs)
		}
	})

	register("informer_resync", "{client-go} SharedIndexInformer (resync 1s) over kubernetes/fake.NewSimpleClientset, in a synctest bubble; only the first resync's delivery is recorded", func(t *testing.T, w *writer) {
		common.Bubble(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			client := fake.NewSimpleClientset(cm("web", 1))
			cms := client.CoreV1().ConfigMaps("default")
			lw := &cache.ListWatch{
				ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return cms.List(ctx, o) },
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return cms.Watch(ctx, o)
				},
			}
			// As informer-gen does: the fake cannot stream lists, and says so.
			informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.ConfigMap{}, time.Second, cache.Indexers{})
			type update struct{ old, new *corev1.ConfigMap }
			var mu sync.Mutex
			var adds []string
			var updates []update
			_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc: func(obj any) {
					mu.Lock()
					defer mu.Unlock()
					adds = append(adds, obj.(*corev1.ConfigMap).Name)
				},
				UpdateFunc: func(o, n any) {
					mu.Lock()
					defer mu.Unlock()
					updates = append(updates, update{o.(*corev1.ConfigMap), n.(*corev1.ConfigMap)})
				},
			})
			must(err)
			stopped := make(chan struct{})
			go func() {
				informer.RunWithContext(ctx)
				close(stopped)
			}()
			// One second and a little: the first resync has been delivered, the second not.
			time.Sleep(1500 * time.Millisecond)
			mu.Lock()
			if len(adds) != 1 || len(updates) != 1 {
				t.Fatalf("after 1.5s: %d adds, %d updates", len(adds), len(updates))
			}
			w.printf("OnAdd %s", adds[0])
			u := updates[0]
			mu.Unlock()
			w.printf("resync: OnUpdate %s, old and new the same object: %v", u.new.Name, u.old == u.new)
			w.printf("resync: old rv %s, new rv %s", quote(u.old.ResourceVersion), quote(u.new.ResourceVersion))
			w.printf("after the resync: list calls %d, watch calls %d", countActions(client, "list"), countActions(client, "watch"))
			cancel()
			<-stopped
		})
	})
}

func countActions(c *fake.Clientset, verb string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

func quote(s string) string { return "\"" + s + "\"" }
