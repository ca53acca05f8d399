package controlplane

import (
	"context"
	"fmt"
	"time"
)

// component is one control plane program: how to run it, the ports it
// binds, and its current process. A component whose port was taken before
// it bound it is started again on fresh ports (see ports.go).
type component struct {
	name string
	// ports point into Cluster.opts.Ports; auto[i] says Start chose
	// ports[i] and may choose again.
	ports []*int
	auto  []bool
	args  func() []string // read the ports when called
	proc  *proc
	tries int
}

// newComponent describes a component binding ports; the ports that are
// zero now are Start's to choose.
func (c *Cluster) newComponent(name string, args func() []string, ports ...*int) *component {
	comp := &component{name: name, args: args, ports: ports}
	for _, p := range ports {
		comp.auto = append(comp.auto, *p == 0)
	}
	return comp
}

// autoPorts are the ports of comp's current try that Start chose.
func (comp *component) autoPorts() []int {
	var out []int
	for i, p := range comp.ports {
		if comp.auto[i] {
			out = append(out, *p)
		}
	}
	return out
}

// launch starts comp's next try, first choosing fresh ports for those Start
// chooses: never one this cluster has used before, which may still be taken.
func (c *Cluster) launch(comp *component) error {
	comp.tries++
	n := len(comp.autoPorts())
	if n > 0 {
		ports, err := c.pick(n, c.avoid)
		if err != nil {
			return fmt.Errorf("starting %s: %w", comp.name, err)
		}
		j := 0
		for i, p := range comp.ports {
			if comp.auto[i] {
				*p = ports[j]
				c.avoid[ports[j]] = true
				j++
			}
		}
	}
	p, err := c.startFn(comp.name, comp.args())
	if err != nil {
		return err
	}
	for i, old := range c.procs {
		if old == comp.proc && old != nil {
			c.procs[i] = p
			comp.proc = p
			return nil
		}
	}
	c.procs = append(c.procs, p)
	comp.proc = p
	return nil
}

// restart stops comp's current try, whose port was taken, and launches the
// next on fresh ports; after bindAttempts tries it gives up with cause.
func (c *Cluster) restart(comp *component, port int, cause error) error {
	if comp.tries >= bindAttempts {
		return comp.proc.failure(fmt.Errorf("a port was taken before %s bound it on each of %d tries (last: %d): %w", comp.name, comp.tries, port, cause))
	}
	c.log.Warn("port taken before the component bound it; restarting it on fresh ports",
		"component", comp.name, "port", port, "try", comp.tries+1, "of", bindAttempts, "cause", cause)
	if err := comp.proc.stop(c.opts.StopTimeout); err != nil {
		return comp.proc.failure(err)
	}
	return c.launch(comp)
}

// await waits until comp's process holds every port of comp and check
// passes, comp exits, or ctx ends. Holding its ports matters as much as the
// check: another control plane's component on a stolen port would pass a
// health check meant for this one. When comp exits saying a port Start
// chose was taken, or another process listens on one, comp is restarted on
// fresh ports (restart).
func (c *Cluster) await(ctx context.Context, comp *component, what string, check func(context.Context) error) error {
	start := time.Now()
	var last error
	for {
		p := comp.proc
		if dead, err := p.exited(); dead {
			port, retry := retryOnFreshPorts(p.output(), comp.autoPorts())
			if !retry {
				return p.failure(fmt.Errorf("while waiting for %s: %w", what, err))
			}
			if err := c.restart(comp, port, err); err != nil {
				return err
			}
			continue
		}
		switch port, holder := c.holder(comp); holder {
		case portTheirs:
			cause := fmt.Errorf("another process listens on port %d", port)
			if !comp.isAuto(port) {
				return p.failure(cause)
			}
			if err := c.restart(comp, port, cause); err != nil {
				return err
			}
			continue
		case portUnbound:
			last = fmt.Errorf("%s does not listen on port %d yet: %w", comp.name, port, errNotReady)
		default:
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			last = check(cctx)
			cancel()
			if last == nil {
				c.log.Info("ready", "component", comp.name, "check", what, "tries", comp.tries, "after", time.Since(start).Round(time.Millisecond))
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return p.failure(fmt.Errorf("%s not ready after %s (last check: %v): %w", what, time.Since(start).Round(time.Second), last, ctx.Err()))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (comp *component) isAuto(port int) bool {
	for _, a := range comp.autoPorts() {
		if a == port {
			return true
		}
	}
	return false
}

// holder says whether comp's process holds all its ports: portOurs when it
// does, else the first port it does not hold and who does. When /proc
// cannot say (not mounted, say), comp is taken to hold them, and the check
// decides; a process that has exited holds none.
func (c *Cluster) holder(comp *component) (int, portHolder) {
	for _, p := range comp.ports {
		h, err := listenerHolder(comp.proc.cmd.Process.Pid, *p)
		if err != nil {
			c.log.Debug("cannot tell who listens on a port; trusting the check", "component", comp.name, "port", *p, "err", err)
			continue
		}
		if h != portOurs {
			return *p, h
		}
	}
	return 0, portOurs
}
