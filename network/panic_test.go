package network

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/berth-node/berth/internal/safe"
	"github.com/vishvananda/netns"
)

// TestEnvDoPanicIsItsError: a panic in a function run in another network
// namespace is that call's error, not PID 1's end; the thread it left in
// that namespace is retired, so no goroutine runs there afterwards, and
// the next call works.
func TestEnvDoPanicIsItsError(t *testing.T) {
	p := newPair(t)
	e, err := newEnv(p.client)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	orig := currentNS(t)
	defer orig.Close()

	err = e.do(func() error { panic("netns bug") })
	var pe *safe.Panic
	if !errors.As(err, &pe) || pe.Value != "netns bug" || !strings.Contains(err.Error(), "in network namespace") {
		t.Fatalf("do(panicking fn) = %v; want the panic as its error", err)
	}

	// The next call runs in the namespace, as ever.
	var inside bool
	if err := e.do(func() error {
		h, err := netns.Get()
		if err != nil {
			return err
		}
		defer h.Close()
		inside = h.Equal(p.client)
		return nil
	}); err != nil || !inside {
		t.Errorf("do after a panic: err %v, ran in the client namespace: %v", err, inside)
	}

	// No thread is left in the client namespace for other goroutines.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wrong int
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			h, err := netns.Get()
			if err != nil {
				t.Error(err)
				return
			}
			defer h.Close()
			if !h.Equal(orig) {
				mu.Lock()
				wrong++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wrong > 0 {
		t.Errorf("%d goroutines ran outside the original network namespace after the panic", wrong)
	}
}

func currentNS(t *testing.T) netns.NsHandle {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
