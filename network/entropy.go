package network

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-node/berth/internal/safe"
	"golang.org/x/sys/unix"
)

// waitCRNG waits, bounded by ctx, until the kernel's random number
// generator is initialized. The DHCP library draws transaction IDs with
// non-blocking getrandom polls for up to two minutes, ignoring our
// deadlines; polls never start the kernel's jitter entropy collection, so
// on a VM without virtio-rng (QEMU TCG) the pool stays empty that long. A
// blocking getrandom does start it (Linux >= 5.4) and returns in about a
// second.
func waitCRNG(ctx context.Context) error { return awaitCRNG(ctx, startCRNG()) }

// StartEntropy makes the kernel start seeding its random number generator
// now, in the background, so that it is ready by the time DHCP (or TLS)
// needs it. PID 1 calls it first thing; it is cheap and safe to call more
// than once.
func StartEntropy() { startCRNG() }

// startCRNG begins the wait in the background, so that it overlaps the
// link wait; awaitCRNG collects it.
func startCRNG() <-chan error {
	done := make(chan error, 1)
	var b [1]byte
	if _, err := unix.Getrandom(b[:], unix.GRND_NONBLOCK); err == nil || !errors.Is(err, unix.EAGAIN) {
		done <- nil
		return done
	}
	safe.Go(nil, "crng", func() {
		var b [1]byte
		_, err := unix.Getrandom(b[:], 0)
		done <- err
	}, func(p *safe.Panic) { done <- p })
	return done
}

func awaitCRNG(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("reading the kernel's random pool: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the kernel's random number generator (DHCP transaction IDs need it; give the VM a virtio-rng device): %w", ctx.Err())
	}
}
