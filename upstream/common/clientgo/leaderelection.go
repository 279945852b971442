package clientgo

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"controlloop/upstream/common"
)

// errCutOff is what a request of an elector cut off from the API server gets.
var errCutOff = errors.New("dial tcp: connect: connection refused")

// CutOff is one elector's Lease client: while down is set, each of its requests fails at once,
// as a replica's requests do when a network partition separates it from the API server.
func CutOff(leases coordinationv1client.LeasesGetter, down *atomic.Bool) coordinationv1client.LeasesGetter {
	return cutOff{leases, down}
}

type cutOff struct {
	coordinationv1client.LeasesGetter
	down *atomic.Bool
}

func (c cutOff) Leases(namespace string) coordinationv1client.LeaseInterface {
	return cutOffLeases{c.LeasesGetter.Leases(namespace), c.down}
}

type cutOffLeases struct {
	coordinationv1client.LeaseInterface
	down *atomic.Bool
}

func (l cutOffLeases) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	if l.down.Load() {
		return nil, errCutOff
	}
	return l.LeaseInterface.Get(ctx, name, o)
}

func (l cutOffLeases) Create(ctx context.Context, lease *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if l.down.Load() {
		return nil, errCutOff
	}
	return l.LeaseInterface.Create(ctx, lease, o)
}

func (l cutOffLeases) Update(ctx context.Context, lease *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if l.down.Load() {
		return nil, errCutOff
	}
	return l.LeaseInterface.Update(ctx, lease, o)
}

// Lease default/controlloop, the lock both electors share.
const leaseNamespace, leaseName = "default", "controlloop"

// LeaseLock is identity's lock on Lease default/controlloop through leases.
func LeaseLock(identity string, leases coordinationv1client.LeasesGetter) *resourcelock.LeaseLock {
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: leaseNamespace, Name: leaseName},
		Client:     leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
}

// LeaseState labels the Lease as the fake holds it.
func LeaseState(client *fake.Clientset) string {
	l, err := client.CoordinationV1().Leases(leaseNamespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	must(err)
	holder, duration, transitions := "", int32(0), int32(0)
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseDurationSeconds != nil {
		duration = *l.Spec.LeaseDurationSeconds
	}
	if l.Spec.LeaseTransitions != nil {
		transitions = *l.Spec.LeaseTransitions
	}
	return fmt.Sprintf("holder %s, leaseDurationSeconds %d, leaseTransitions %d", quote(holder), duration, transitions)
}

// Elector is one candidate of a scenario: its elector, running, and how its Run went.
type Elector struct {
	*leaderelection.LeaderElector
	// Cancel cancels the context Run was given; Done is closed when Run returns.
	Cancel context.CancelFunc
	Done   chan struct{}
	// Stopped counts OnStoppedLeading's calls; LeadingCancelled is set when the context
	// OnStartedLeading was given is cancelled.
	Stopped          atomic.Int32
	LeadingCancelled atomic.Bool
}

// StartElector runs an elector with config (its callbacks replaced by the Elector's own) until
// its Cancel is called.
func StartElector(t *testing.T, config leaderelection.LeaderElectionConfig) *Elector {
	e := &Elector{Done: make(chan struct{})}
	config.Callbacks = leaderelection.LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context) {
			<-ctx.Done()
			e.LeadingCancelled.Store(true)
		},
		OnStoppedLeading: func() { e.Stopped.Add(1) },
	}
	le, err := leaderelection.NewLeaderElector(config)
	if err != nil {
		t.Fatal(err)
	}
	e.LeaderElector = le
	ctx, cancel := context.WithCancel(context.Background())
	e.Cancel = cancel
	go func() {
		le.Run(ctx)
		close(e.Done)
	}()
	return e
}

// Returned says whether Run has returned.
func (e *Elector) Returned() bool {
	select {
	case <-e.Done:
		return true
	default:
		return false
	}
}

// outageConfigs are the two electors' configurations of the outage-then-release run: a's
// lease is shorter than its retry period plus its renew deadline, so that another candidate
// can take over while a's renew loop still runs; b retries every 100 ms, so that when it takes
// over depends little on its jitter.
func outageConfigs(aLeases, bLeases coordinationv1client.LeasesGetter) (a, b leaderelection.LeaderElectionConfig) {
	a = leaderelection.LeaderElectionConfig{
		Lock:          LeaseLock("a", aLeases),
		LeaseDuration: 11 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 4 * time.Second,
		ReleaseOnCancel: true,
	}
	b = leaderelection.LeaderElectionConfig{
		Lock:          LeaseLock("b", bLeases),
		LeaseDuration: 11 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
	}
	return a, b
}

// outageTimeline is the outage-then-release run, in virtual seconds from the start: a acquires
// at 0 and renews at 4; it is cut off from 5 (its attempts at 8, 12 and 16 fail; its renew
// deadline would pass at 18); b, which saw a's last renewal at about 4, takes over between 15
// and 15.5; a reaches the API server again at 16.5, and its context is cancelled at 17.
var outageTimeline = struct{ CutOff, Look, Reconnect, Cancel time.Duration }{
	5 * time.Second, 15500 * time.Millisecond, 16500 * time.Millisecond, 17 * time.Second,
}

// SleepUntil sleeps until at after start, then lets the bubble settle.
func SleepUntil(start time.Time, at time.Duration) {
	time.Sleep(time.Until(start.Add(at)))
	synctest.Wait()
}

// Seconds prints d as the scenarios' timelines do: "16.5s".
func Seconds(d time.Duration) string { return common.Float(d.Seconds()) + "s" }

func init() {
	registerSince(37, "leader_election_release_after_outage", "{client-go} tools/leaderelection, two electors a and b on Lease default/controlloop (resourcelock.LeaseLock over one kubernetes/fake.NewSimpleClientset), in a synctest bubble. a: lease 11s, renew deadline 10s, retry 4s, ReleaseOnCancel; b: lease 11s, renew deadline 1s, retry 100ms. a's Lease client fails each request at once while a is cut off (from 5s to 16.5s); a's context is cancelled at 17s, after b took over and a can reach the API server again. The Lease as the fake holds it at each step, and each elector's IsLeader", func(t *testing.T, w *writer) {
		w.note("b takes over at a jittered instant between 15s and 15.5s (its acquire loop waits 100 ms to 220 ms between attempts); no line depends on it. With a lease no shorter than the retry period plus the renew deadline (the usual 15s, 10s, 2s), a's renew loop gives up before anyone can take over, and its release, made while it is still cut off, fails")
		w.note("the fake does not check resourceVersions: after a's release, b's next renewal (its fast path, from the record it last wrote) succeeds on the fake where an API server would answer 409 and b would take the lease over again; no line is recorded after the release")
		common.Bubble(t, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			var aDown atomic.Bool
			aConfig, bConfig := outageConfigs(CutOff(client.CoordinationV1(), &aDown), client.CoordinationV1())
			start := time.Now()
			tl := outageTimeline
			a := StartElector(t, aConfig)
			synctest.Wait()
			w.printf("0s: a runs: %s; a leads %v", LeaseState(client), a.IsLeader())
			b := StartElector(t, bConfig)
			synctest.Wait()
			w.printf("0s: b runs: %s; b leads %v", LeaseState(client), b.IsLeader())
			SleepUntil(start, tl.CutOff)
			aDown.Store(true)
			w.printf("%s: a is cut off from the API server: %s", Seconds(tl.CutOff), LeaseState(client))
			SleepUntil(start, tl.Look)
			w.printf("%s: %s; a leads %v, b leads %v; a's Run returned %v", Seconds(tl.Look), LeaseState(client), a.IsLeader(), b.IsLeader(), a.Returned())
			SleepUntil(start, tl.Reconnect)
			aDown.Store(false)
			w.printf("%s: a reaches the API server again; a leads %v, a's Run returned %v", Seconds(tl.Reconnect), a.IsLeader(), a.Returned())
			SleepUntil(start, tl.Cancel)
			a.Cancel()
			<-a.Done
			synctest.Wait()
			w.printf("%s: a's context cancelled; a's Run returned, OnStoppedLeading called %d time(s)", Seconds(tl.Cancel), a.Stopped.Load())
			w.printf("%s: after a's release: %s; a leads %v, b leads %v", Seconds(tl.Cancel), LeaseState(client), a.IsLeader(), b.IsLeader())
			b.Cancel()
			<-b.Done
		})
	})
}
