package main

import (
	"context"
	"testing"
)

// An event fires once however often it is fired (containerd's AfterReady
// hook runs after each restart), and a wait ends either way: at the event,
// or at the context's end, saying which.
func TestEvent(t *testing.T) {
	e := newEvent()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if e.wait(ctx) {
		t.Error("wait on an unfired event with a canceled context said it fired")
	}
	e.fire()
	e.fire()
	if !e.wait(context.Background()) {
		t.Error("wait after fire did not see it")
	}
}
