package common

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// ---------------------------------------------------------------------------------------
// client-go alone: a shared informer, a handler that queues the key, a rate-limiting queue
// and a worker loop, as the essay (and client-go's examples/workqueue) write one.
// ---------------------------------------------------------------------------------------

type clientGoSubject struct {
	informer toolscache.SharedIndexInformer
	queue    workqueue.TypedRateLimitingInterface[string]
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu           sync.Mutex
	events, keys int
}

// ClientGoSubject is the essay's controller on client-go alone: every add and update of the
// object queues its key on DefaultTypedControllerRateLimiter's queue; each worker gets a key,
// reads the object from the informer's indexer, works, forgets and is done.
func ClientGoSubject(client kubernetes.Interface, workers int, cost time.Duration, rec *Recorder) Subject {
	s := &clientGoSubject{
		informer: NewInformer(client, &corev1.ConfigMap{}, 0, nil),
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	enqueue := func(obj any) {
		key, err := toolscache.MetaNamespaceKeyFunc(obj)
		if err != nil || obj.(*corev1.ConfigMap).Name != Object {
			return
		}
		s.mu.Lock()
		s.events++
		s.keys++
		s.mu.Unlock()
		s.queue.Add(key)
	}
	_, err := s.informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	Must(err)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.informer.RunWithContext(ctx)
	}()
	for range workers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for s.processNextItem(cost, rec) {
			}
		}()
	}
	return s
}

func (s *clientGoSubject) processNextItem(cost time.Duration, rec *Recorder) bool {
	key, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(key)
	obj, exists, err := s.informer.GetIndexer().GetByKey(key)
	v := -1
	if err == nil && exists {
		v = ValueOf(obj.(*corev1.ConfigMap))
	}
	rec.Act(v, cost)
	s.queue.Forget(key)
	return true
}

func (s *clientGoSubject) Counts() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events, s.keys
}
func (s *clientGoSubject) QueueLen() int { return s.queue.Len() }
func (s *clientGoSubject) CacheValue() int {
	obj, exists, err := s.informer.GetIndexer().GetByKey(Namespace + "/" + Object)
	if err != nil || !exists {
		return -1
	}
	return ValueOf(obj.(*corev1.ConfigMap))
}
func (s *clientGoSubject) Stop() {
	s.queue.ShutDown()
	s.cancel()
	s.wg.Wait()
}
