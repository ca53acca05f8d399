package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lease says which Lease the replicas compete for, and how.
type Lease struct {
	Namespace, Name string
	// ID is this replica's identity in the Lease (its pod's name).
	ID string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's
	// (15 s, 10 s and 2 s when zero, kube-controller-manager's).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// ErrLostLease is RunLeader's answer when this replica stopped leading
// before its context ended: the caller exits, and is restarted to
// compete again, so a replica that lost the lease never goes on acting.
var ErrLostLease = errors.New("lost the rollout controller's lease")

// RunLeader competes for the Lease and runs the controller's rounds for
// as long as it holds it. It returns nil once ctx ends, ErrLostLease if
// the lease was lost first; either way the rounds have stopped.
func RunLeader(ctx context.Context, o Options, l Lease) error {
	c := New(o)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name},
		Client:     o.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.ID},
	}
	// The rounds run on client-go's goroutine (OnStartedLeading); done is
	// closed when they have returned, so that RunLeader returns only
	// after them.
	done := make(chan struct{})
	var led atomic.Bool
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		Name:          l.Name,
		LeaseDuration: cmp.Or(l.LeaseDuration, 15*time.Second),
		RenewDeadline: cmp.Or(l.RenewDeadline, 10*time.Second),
		RetryPeriod:   cmp.Or(l.RetryPeriod, 2*time.Second),
		// The next leader need not wait out the lease after a clean
		// stop (a rolling update of the Deployment).
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				defer close(done)
				led.Store(true)
				c.log.Info("leading: the rollout controller acts", "lease", l.Namespace+"/"+l.Name, "id", l.ID)
				c.Run(ctx)
			},
			OnStoppedLeading: func() { c.log.Info("not leading", "lease", l.Namespace+"/"+l.Name, "id", l.ID) },
			OnNewLeader: func(id string) {
				if id != l.ID {
					c.log.Info("another replica leads", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election on lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	le.Run(ctx)
	// Run returns early only when the lease is lost (acquiring ends only
	// with ctx). client-go starts OnStartedLeading on its own goroutine:
	// if it had not started by now, it finds its context ended and does
	// not act.
	if led.Load() {
		<-done
	}
	if ctx.Err() == nil {
		return ErrLostLease
	}
	return nil
}
