package clientgo

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"

	"controlloop/upstream/common"
)

const web = "default/web"

// counter is a gauge or counter the queue writes its depth and adds into.
type counter struct{ n atomic.Int64 }

func (c *counter) Inc()            { c.n.Add(1) }
func (c *counter) Dec()            { c.n.Add(-1) }
func (c *counter) Set(float64)     {}
func (c *counter) Observe(float64) {}

// depthProvider hands the queue a depth gauge and an adds counter we can read back.
type depthProvider struct{ depth, adds counter }

func (p *depthProvider) NewDepthMetric(string) workqueue.GaugeMetric            { return &p.depth }
func (p *depthProvider) NewAddsMetric(string) workqueue.CounterMetric           { return &p.adds }
func (p *depthProvider) NewLatencyMetric(string) workqueue.HistogramMetric      { return &counter{} }
func (p *depthProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric { return &counter{} }
func (p *depthProvider) NewRetriesMetric(string) workqueue.CounterMetric        { return &counter{} }
func (p *depthProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return &counter{}
}
func (p *depthProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return &counter{}
}

func init() {
	register("workqueue_coalescing", "{client-go} Typed queue with a metrics provider reading depth and adds", func(t *testing.T, w *writer) {
		p := &depthProvider{}
		q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "coalescing", MetricsProvider: p})
		step := func(what string) {
			w.printf("%s: len %d, depth %d, adds %d", what, q.Len(), p.depth.n.Load(), p.adds.n.Load())
		}
		for range 100_000 {
			q.Add(web)
		}
		step("100000 adds of default/web")
		item, _ := q.Get()
		step("get -> " + item)
		for range 200 {
			q.Add(web)
		}
		step("200 adds while it is held")
		q.Done(web)
		step("done")
		item, _ = q.Get()
		step("get -> " + item)
		q.Done(web)
		step("done")
		q.ShutDown()
		_, shutdown := q.Get()
		w.printf("shut down, get: shutdown %v", shutdown)
	})

	register("workqueue_forget_without_done", "{client-go} rate-limiting queue with DefaultTypedControllerRateLimiter, in a synctest bubble (the 500 ms wait is virtual time)", func(t *testing.T, w *writer) {
		common.Bubble(t, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
			defer q.ShutDown()
			q.Add(web)
			item, _ := q.Get()
			w.printf("add, get -> %s", item)
			q.AddRateLimited(web)
			q.Forget(web)
			w.printf("add_rate_limited, forget: num_requeues %d, len %d", q.NumRequeues(web), q.Len())
			for range 100 {
				q.Add(web)
			}
			w.printf("100 adds: len %d", q.Len())
			got := make(chan string, 1)
			go func() {
				if item, shutdown := q.Get(); !shutdown {
					got <- item
				}
			}()
			time.Sleep(500 * time.Millisecond)
			select {
			case <-got:
				w.printf("get within 500ms: returned true")
			default:
				w.printf("get within 500ms: returned false")
			}
			q.Done(web)
			synctest.Wait()
			select {
			case item := <-got:
				w.printf("late done: the waiting get -> %s", item)
			default:
				t.Fatal("the late Done did not release the key")
			}
			q.Done(web)
		})
	})

	register("workqueue_done_without_forget", "{client-go} rate-limiting queue, DefaultTypedControllerRateLimiter, in a synctest bubble (each backoff waited out in virtual time)", func(t *testing.T, w *writer) {
		common.Bubble(t, func(t *testing.T) {
			limiter := &recordingLimiter{inner: workqueue.DefaultTypedControllerRateLimiter[string]()}
			q := workqueue.NewTypedRateLimitingQueue[string](limiter)
			defer q.ShutDown()
			q.Add(web)
			fail := func(what string) {
				item, _ := q.Get()
				q.AddRateLimited(item)
				q.Done(item)
				w.printf("%s: add_rate_limited delay %v, done; num_requeues %d", what, limiter.last, q.NumRequeues(web))
				start := time.Now()
				time.Sleep(limiter.last)
				synctest.Wait()
				if q.Len() != 1 || time.Since(start) != limiter.last {
					t.Fatalf("the key was not ready after exactly %v", limiter.last)
				}
			}
			for i := 1; i <= 3; i++ {
				fail("failure " + itoa(i))
			}
			item, _ := q.Get()
			q.Done(item)
			w.printf("success, done without forget: num_requeues %d", q.NumRequeues(web))
			q.Add(web)
			fail("next failure")
			item, _ = q.Get()
			q.Forget(item)
			q.Done(item)
			w.printf("success, forget and done: num_requeues %d", q.NumRequeues(web))
			q.Add(web)
			fail("next failure")
		})
	})

	register("rate_limiter_default", "{client-go} DefaultTypedControllerRateLimiter().When for one item (its bucket never empties in 25 calls)", func(t *testing.T, w *writer) {
		l := workqueue.DefaultTypedControllerRateLimiter[string]()
		first := 0
		for i := 1; i <= 25; i++ {
			d := l.When(web)
			if d == 1000*time.Second && first == 0 {
				first = i
			}
			w.printf("failure %d: %v", i, d)
		}
		w.printf("first failure at the 1000s ceiling: %d", first)
		w.printf("num_requeues: %d", l.NumRequeues(web))
	})

	register("rate_limiter_bucket_120", "{client-go} MaxOf(ItemExponentialFailure(5ms,1000s), Bucket) with the bucket's x/time/rate reservations taken at one frozen instant; cross-checked exactly against DefaultTypedControllerRateLimiter in a synctest bubble, where no time passes between the 120 calls", func(t *testing.T, w *writer) {
		common.Bubble(t, func(t *testing.T) { bucket120(t, w) })
	})
}

func bucket120(t *testing.T, w *writer) {
	{
		frozen := workqueue.NewTypedMaxOfRateLimiter[string](
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
			&frozenBucket{limiter: rate.NewLimiter(rate.Limit(10), 100), at: time.Unix(0, 0)},
		)
		real := workqueue.DefaultTypedControllerRateLimiter[string]()
		for i := 1; i <= 120; i++ {
			key := "default/obj-" + pad3(i)
			d, r := frozen.When(key), real.When(key)
			if r != d {
				t.Fatalf("item %d: the frozen bucket says %v, the limiter in the bubble %v", i, d, r)
			}
			w.printf("item %s: %v", pad3(i), d)
		}
	}
}

// recordingLimiter remembers the last delay it handed out.
type recordingLimiter struct {
	inner workqueue.TypedRateLimiter[string]
	last  time.Duration
}

func (r *recordingLimiter) When(item string) time.Duration {
	r.last = r.inner.When(item)
	return r.last
}
func (r *recordingLimiter) Forget(item string)          { r.inner.Forget(item) }
func (r *recordingLimiter) NumRequeues(item string) int { return r.inner.NumRequeues(item) }

// frozenBucket is client-go's bucket limiter with time stopped: every reservation is made at
// the same instant, so the delays are x/time/rate's arithmetic alone.
type frozenBucket struct {
	limiter *rate.Limiter
	at      time.Time
}

func (b *frozenBucket) When(string) time.Duration {
	return b.limiter.ReserveN(b.at, 1).DelayFrom(b.at)
}
func (b *frozenBucket) Forget(string)          {}
func (b *frozenBucket) NumRequeues(string) int { return 0 }

func itoa(i int) string {
	return string(rune('0' + i/10%10))[0:b2i(i >= 10)] + string(rune('0'+i%10))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func pad3(i int) string {
	return string([]byte{byte('0' + i/100), byte('0' + i/10%10), byte('0' + i%10)})
}
