package cr

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"controlloop/upstream/common"
)

// ManagerLeaseHow says how ManagerLeaseLost runs, for the header.
func ManagerLeaseHow() string {
	return "controller-runtime " + common.ControllerRuntime() + " (client-go " + common.ClientGo() + "): manager.New with LeaderElection on a LeaseLock over client-go's fake clientset (LeaderElectionResourceLockInterface; the defaults: a 15 s lease, a 10 s renew deadline, a 2 s retry), metrics off, one Runnable that needs leader election and waits on its context; at 21 s (between two renewals, which fall on even seconds) every request for the Lease starts failing (a reactor on the fake: the API server unreachable, as in a partition), so the manager cannot renew; in a synctest bubble, so every time below is exact"
}

// ManagerLeaseLostScenario records what the manager does when it loses its lease: when its
// runnable's context is cancelled, and what Start returns.
func ManagerLeaseLostScenario(t *testing.T, w *common.Writer) {
	common.Bubble(t, func(t *testing.T) { ManagerLeaseLost(t, w.Printf) })
}

// ManagerLeaseLost is the scenario's body.
func ManagerLeaseLost(t *testing.T, printf func(string, ...any)) {
	start := time.Now()
	at := func() int64 { return time.Since(start).Milliseconds() }
	clientset := fake.NewSimpleClientset()
	var partitioned atomic.Bool
	clientset.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if partitioned.Load() {
			return true, nil, errors.New("the API server is unreachable")
		}
		return false, nil, nil
	})
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: "manager"},
		Client:     clientset.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "a"},
	}
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{
		LeaderElection:                      true,
		LeaderElectionID:                    "manager",
		LeaderElectionNamespace:             "default",
		LeaderElectionResourceLockInterface: lock,
		Metrics:                             metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	var cancelledAt atomic.Int64
	cancelledAt.Store(-1)
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		printf("%d ms: the runnable starts (it needs leader election)", at())
		<-ctx.Done()
		cancelledAt.Store(at()) // noted, printed by the scenario: one goroutine prints
		return nil
	}))
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan error, 1)
	go func() { returned <- mgr.Start(ctx) }()

	time.Sleep(21 * time.Second)
	leases := clientset.CoordinationV1().Leases("default")
	lease, err := leases.Get(ctx, "manager", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Lease: %v", err)
	}
	printf("%d ms: the Lease is held by %q, renewed at %d ms", at(), *lease.Spec.HolderIdentity, lease.Spec.RenewTime.Sub(start).Milliseconds())
	partitioned.Store(true)
	printf("%d ms: every request for the Lease fails from now on", at())
	select {
	case err := <-returned:
		printf("%d ms: Start returns: %v", at(), err)
	case <-time.After(time.Minute):
		printf("%d ms: Start has not returned after a minute", at())
	}
	time.Sleep(3 * time.Second)
	printf("%d ms: the runnable's context was cancelled at %d ms", at(), cancelledAt.Load())
}
