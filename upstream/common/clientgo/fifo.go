package clientgo

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// cm is a ConfigMap in default named name, with data.v = v when v > 0.
func cm(name string, v int) *corev1.ConfigMap {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if v > 0 {
		c.Data = map[string]string{"v": fmt.Sprint(v)}
	}
	return c
}

func objLabel(o any) string {
	switch o := o.(type) {
	case nil:
		return "nil"
	case *corev1.ConfigMap:
		if v, ok := o.Data["v"]; ok {
			return o.Name + " v" + v
		}
		return o.Name
	case unkeyable:
		return "unkeyable " + o.name
	case cache.DeletedFinalStateUnknown:
		return "tombstone(" + o.Key + ": " + objLabel(o.Obj) + ")"
	case cache.ReplacedAllInfo:
		var names []string
		for _, x := range o.Objects {
			names = append(names, objLabel(x))
		}
		return fmt.Sprintf("rv %s [%s]", o.ResourceVersion, strings.Join(names, ", "))
	case cache.SyncAllInfo:
		return "all"
	case cache.BookmarkInfo:
		return "rv " + o.ResourceVersion
	}
	return fmt.Sprintf("%T", o)
}

func deltaLabel(d cache.Delta) string { return string(d.Type) + " " + objLabel(d.Object) }

func deltasLabel(ds []cache.Delta) string {
	var out []string
	for _, d := range ds {
		out = append(out, deltaLabel(d))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// drainPops closes the FIFO and pops until it reports closed: every Pop's deltas.
func drainPops(f cache.Queue) []string {
	f.Close()
	var pops []string
	for {
		var got string
		_, err := f.Pop(func(obj any, _ bool) error {
			got = deltasLabel(obj.(cache.Deltas))
			return nil
		})
		if errors.Is(err, cache.ErrFIFOClosed) {
			return pops
		}
		pops = append(pops, got)
	}
}

// drainBatches closes the RealFIFO and pops batches until it reports closed.
func drainBatches(f *cache.RealFIFO) []string {
	f.Close()
	var pops []string
	for {
		var got string
		err := f.PopBatch(func(ds []cache.Delta, _ bool) error {
			got = "batch " + deltasLabel(ds)
			return nil
		}, func(obj any, _ bool) error {
			got = "single " + deltasLabel(obj.(cache.Deltas))
			return nil
		})
		if errors.Is(err, cache.ErrFIFOClosed) {
			return pops
		}
		pops = append(pops, got)
	}
}

func newIndexer(objs ...*corev1.ConfigMap) cache.Indexer {
	idx := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			panic(err)
		}
	}
	return idx
}

// The three FIFOs an informer builds, as tools/cache/controller.go's newQueueFIFO does.
func deltaFIFO(known cache.KeyListerGetter) *cache.DeltaFIFO {
	return cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{KnownObjects: known, EmitDeltaTypeReplaced: true})
}

func realFIFO(known cache.KeyListerGetter) *cache.RealFIFO {
	return cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{KnownObjects: known})
}

func atomicFIFO() *cache.RealFIFO {
	return cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{AtomicEvents: true, UnlockWhileProcessing: true, EmitDeltaTypeBookmark: true})
}

func interleave(f cache.Queue) {
	must(f.Add(cm("alpha", 1)))
	must(f.Add(cm("beta", 1)))
	must(f.Update(cm("alpha", 2)))
	must(f.Update(cm("beta", 2)))
	must(f.Update(cm("alpha", 3)))
	must(f.Delete(cm("beta", 2)))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func printPops(w *writer, fifo string, pops []string) {
	w.printf("%s: %d pops", fifo, len(pops))
	for i, p := range pops {
		w.printf("  pop %d: %s", i+1, p)
	}
}

func init() {
	register("fifo_interleave", "client-go DeltaFIFO (informer options, empty indexer), RealFIFO (known objects) Pop, atomic RealFIFO PopBatch; add alpha v1, add beta v1, update alpha v2, update beta v2, update alpha v3, delete beta v2, then drain", func(t *testing.T, w *writer) {
		d := deltaFIFO(newIndexer())
		interleave(d)
		printPops(w, "DeltaFIFO Pop", drainPops(d))
		r := realFIFO(newIndexer())
		interleave(r)
		printPops(w, "RealFIFO Pop", drainPops(r))
		a := atomicFIFO()
		interleave(a)
		printPops(w, "atomic RealFIFO PopBatch", drainBatches(a))
	})

	register("fifo_ghost_delete", "client-go FIFOs, a Delete of an object no one knew (empty indexer, nothing queued)", func(t *testing.T, w *writer) {
		d := deltaFIFO(newIndexer())
		must(d.Delete(cm("ghost", 0)))
		printPops(w, "DeltaFIFO Pop", drainPops(d))
		r := realFIFO(newIndexer())
		must(r.Delete(cm("ghost", 0)))
		printPops(w, "RealFIFO Pop", drainPops(r))
		a := atomicFIFO()
		must(a.Delete(cm("ghost", 0)))
		printPops(w, "atomic RealFIFO PopBatch", drainBatches(a))
	})

	register("fifo_replace_deletions", "client-go FIFOs; the indexer holds alpha v1, beta v1, gamma v1; update beta v2 is queued; then Replace([alpha v5, delta v1], rv 10)", func(t *testing.T, w *writer) {
		known := func() cache.Indexer { return newIndexer(cm("alpha", 1), cm("beta", 1), cm("gamma", 1)) }
		d := deltaFIFO(known())
		must(d.Update(cm("beta", 2)))
		must(d.Replace([]any{cm("alpha", 5), cm("delta", 1)}, "10"))
		printPops(w, "DeltaFIFO Pop", drainPops(d))
		r := realFIFO(known())
		must(r.Update(cm("beta", 2)))
		must(r.Replace([]any{cm("alpha", 5), cm("delta", 1)}, "10"))
		printPops(w, "RealFIFO Pop", drainPops(r))
		a := atomicFIFO()
		must(a.Update(cm("beta", 2)))
		must(a.Replace([]any{cm("alpha", 5), cm("delta", 1)}, "10"))
		printPops(w, "atomic RealFIFO PopBatch", drainBatches(a))
	})
}
