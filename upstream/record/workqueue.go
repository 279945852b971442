package main

import (
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
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

// getWithin returns what Get returned within d, or "" if it was still blocked.
func getWithin[T comparable](q workqueue.TypedInterface[T], d time.Duration) (T, bool, chan T) {
	ch := make(chan T, 1)
	go func() {
		item, shutdown := q.Get()
		if !shutdown {
			ch <- item
		}
	}()
	select {
	case item := <-ch:
		return item, true, nil
	case <-time.After(d):
		var zero T
		return zero, false, ch
	}
}

func init() {
	register("workqueue_coalescing", "client-go Typed queue with a metrics provider reading depth and adds", func(w *writer) {
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

	register("workqueue_forget_without_done", "client-go rate-limiting queue with DefaultTypedControllerRateLimiter, real clock; the 500 ms wait is real time", func(w *writer) {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
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
		_, got, pending := getWithin[string](q, 500*time.Millisecond)
		w.printf("get within 500ms: returned %v", got)
		q.Done(web)
		select {
		case item := <-pending:
			w.printf("late done: the waiting get -> %s", item)
		case <-time.After(5 * time.Second):
			panic("the late Done did not release the key within 5s")
		}
		q.Done(web)
		q.ShutDown()
	})

	register("workqueue_done_without_forget", "client-go rate-limiting queue, DefaultTypedControllerRateLimiter, fake clock (k8s.io/utils/clock/testing)", func(w *writer) {
		clock := testingclock.NewFakeClock(time.Unix(0, 0))
		limiter := &recordingLimiter{inner: workqueue.DefaultTypedControllerRateLimiter[string]()}
		q := workqueue.NewTypedRateLimitingQueueWithConfig[string](limiter, workqueue.TypedRateLimitingQueueConfig[string]{Clock: clock})
		defer q.ShutDown()
		q.Add(web)
		fail := func(what string) {
			item, _ := q.Get()
			q.AddRateLimited(item)
			q.Done(item)
			w.printf("%s: add_rate_limited delay %v, done; num_requeues %d", what, limiter.last, q.NumRequeues(web))
			stepUntilQueued(clock, q, limiter.last)
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

	register("rate_limiter_default", "client-go DefaultTypedControllerRateLimiter().When for one item (its bucket never empties in 25 calls)", func(w *writer) {
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

	register("rate_limiter_bucket_120", "client-go MaxOf(ItemExponentialFailure(5ms,1000s), Bucket) with the bucket's x/time/rate reservations taken at one frozen instant; cross-checked against DefaultTypedControllerRateLimiter on the real clock to the millisecond", func(w *writer) {
		frozen := workqueue.NewTypedMaxOfRateLimiter[string](
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
			&frozenBucket{limiter: rate.NewLimiter(rate.Limit(10), 100), at: time.Unix(0, 0)},
		)
		real := workqueue.DefaultTypedControllerRateLimiter[string]()
		for i := 1; i <= 120; i++ {
			key := "default/obj-" + pad3(i)
			d, r := frozen.When(key), real.When(key)
			if r.Round(time.Millisecond) != d {
				panic("the real-clock limiter drifted by more than half a millisecond: rerun on a quieter machine")
			}
			w.printf("item %s: %v", pad3(i), d)
		}
	})
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

// stepUntilQueued advances the fake clock by d and waits (real time, bounded) until the
// delaying queue's goroutine has moved the item in.
func stepUntilQueued(clock *testingclock.FakeClock, q workqueue.TypedRateLimitingInterface[string], d time.Duration) {
	deadline := time.Now().Add(5 * time.Second)
	for !clock.HasWaiters() {
		if time.Now().After(deadline) {
			panic("the delaying queue never armed its timer")
		}
		time.Sleep(time.Millisecond)
	}
	clock.Step(d)
	for q.Len() == 0 {
		if time.Now().After(deadline) {
			panic("the delayed item never became ready: delaying queue stuck?")
		}
		time.Sleep(time.Millisecond)
	}
}

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
