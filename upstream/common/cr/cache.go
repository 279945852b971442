package cr

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"controlloop/upstream/common"
)

func init() {
	// controller-runtime's delegating logger warns after 30 s when none is set.
	crlog.SetLogger(logr.Discard())
}

// CRCache is controller-runtime's own cache (cache.New), every informer of it built by
// controller-runtime's informers map with the resync period it computes, over the fake
// instead of a REST client (cache.Options.NewInformer). Resyncs receives each informer's
// period.
type CRCache struct {
	crcache.Cache
	mapper  meta.RESTMapper
	mu      sync.Mutex
	Resyncs []time.Duration
	// ByKind is each informer's period by the kind it holds ("ConfigMap", "Pod").
	ByKind map[string]time.Duration
}

// NewCRCache builds the cache. syncPeriod nil: controller-runtime's default (10 h).
func NewCRCache(client kubernetes.Interface, syncPeriod *time.Duration, d *common.Dropper) (*CRCache, error) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	c := &CRCache{mapper: mapper, ByKind: map[string]time.Duration{}}
	cache, err := crcache.New(&rest.Config{Host: "http://fake.invalid"}, crcache.Options{
		Scheme:     clientgoscheme.Scheme,
		Mapper:     mapper,
		SyncPeriod: syncPeriod,
		NewInformer: func(_ toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			c.mu.Lock()
			c.Resyncs = append(c.Resyncs, resync)
			c.ByKind[strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")] = resync
			c.mu.Unlock()
			return toolscache.NewSharedIndexInformer(common.FakeListWatch(client, obj, d), obj, resync, idx)
		},
	})
	if err != nil {
		return nil, err
	}
	c.Cache = cache
	return c, nil
}

// ResyncPeriods are the periods controller-runtime gave its informers so far.
func (c *CRCache) ResyncPeriods() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.Resyncs...)
}
