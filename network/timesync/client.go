package timesync

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/beevik/ntp"

	"github.com/berth-node/berth/internal/safe"
)

// The Amazon Time Sync Service: link-local on every Nitro instance, and on
// the instance's IPv6 prefix for IPv6-only subnets.
const (
	AmazonTimeSync4 = "169.254.169.123:123"
	AmazonTimeSync6 = "[fd00:ec2::123]:123"
)

// Where a source came from.
const (
	OriginConfig   = "config"   // berth.ntp
	OriginUserData = "userdata" // the berth.dev/ntp-servers annotation
	OriginDHCP     = "dhcp"     // DHCPv4 option 42
	OriginDHCPv6   = "dhcpv6"   // DHCPv6 option 56
	OriginAmazon   = "amazon"   // the Amazon Time Sync Service
)

// Source is one NTP server.
type Source struct {
	// Addr is host:port.
	Addr   string `json:"addr"`
	Origin string `json:"origin"`
}

// Sources is the list in priority order: the command line's (an operator
// said so), DHCP's (the network's own; IPv6 ones from DHCPv6), then the
// Amazon Time Sync Service, always there as the fallback it is on EC2: its
// IPv4 address when the node has an IPv4 address, its IPv6 one on an
// IPv6-only node (as EC2 offers it: on an IPv4 node the IPv6 address is
// only an unreachable network and a warning every boot). With no address
// known (nodeAddrs empty) both are asked. Repeats are dropped.
func Sources(config []string, dhcp []netip.Addr, nodeAddrs []netip.Addr) []Source {
	var out []Source
	add := func(addr, origin string) {
		if !slices.ContainsFunc(out, func(s Source) bool { return s.Addr == addr }) {
			out = append(out, Source{Addr: addr, Origin: origin})
		}
	}
	for _, a := range config {
		add(a, OriginConfig)
	}
	for _, a := range dhcp {
		origin := OriginDHCP
		if a.Is6() {
			origin = OriginDHCPv6
		}
		add(netip.AddrPortFrom(a, 123).String(), origin)
	}
	has4 := slices.ContainsFunc(nodeAddrs, func(a netip.Addr) bool { return a.Unmap().Is4() })
	if has4 || len(nodeAddrs) == 0 {
		add(AmazonTimeSync4, OriginAmazon)
	}
	if !has4 {
		add(AmazonTimeSync6, OriginAmazon)
	}
	return out
}

// maxErrors bounds the errors kept in Status.
const maxErrors = 8

// Status is the client's state: the boot report's time section.
type Status struct {
	Sources []SourceStatus `json:"sources"`
	// Server is the chosen source's address.
	Server  string `json:"server,omitempty"`
	Stratum uint8  `json:"stratum,omitempty"`
	Synced  bool   `json:"synced"`
	// FirstOffsetMs is the offset measured at the first sync;
	// OffsetMs the latest.
	FirstOffsetMs float64 `json:"firstOffsetMs"`
	OffsetMs      float64 `json:"offsetMs"`
	Stepped       bool    `json:"stepped"`
	StepMs        float64 `json:"stepMs,omitempty"`
	// FirstSyncMs and LastSyncMs are ms since kernel start.
	FirstSyncMs int64 `json:"firstSyncMs,omitempty"`
	LastSyncMs  int64 `json:"lastSyncMs,omitempty"`
	Syncs       int   `json:"syncs"`
	PollS       int64 `json:"pollS,omitempty"`
	// Errors are the latest failures, oldest first.
	Errors []string `json:"errors,omitempty"`
}

// SourceStatus is one source's record.
type SourceStatus struct {
	Source
	Answers   int    `json:"answers"`
	Failures  int    `json:"failures"`
	LastError string `json:"lastError,omitempty"`
}

// Options configure a Client.
type Options struct {
	Sources []Source
	Clock   Clock
	Policy  Policy
	// Timeout bounds one question (default 1 s: the Amazon service
	// answers in well under a millisecond).
	Timeout time.Duration
	Log     *slog.Logger
	// Now is the system clock as the NTP exchange reads it (default
	// time.Now); tests pass a fake clock's.
	Now func() time.Time
	// Since is the time since kernel start, for FirstSyncMs.
	Since func() time.Duration
	// OnChange gets the new status after each sample, off the caller's
	// goroutine and without the client's lock.
	OnChange func(Status)
}

// DefaultTimeout bounds one NTP question.
const DefaultTimeout = time.Second

// Client keeps the clock in sync: Run asks the servers, WaitFirst lets
// boot wait for the first answer.
type Client struct {
	o Options
	m *Machine
	// first is closed at the first clock update, round once the first
	// burst is over (every source answered or failed).
	first, round chan struct{}
	mu           sync.Mutex
	st           Status
}

// New makes a client; nothing happens before Run.
func New(o Options) *Client {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Since == nil {
		start := time.Now()
		o.Since = func() time.Duration { return time.Since(start) }
	}
	c := &Client{o: o, m: NewMachine(len(o.Sources), o.Policy), first: make(chan struct{}), round: make(chan struct{})}
	c.st.Sources = make([]SourceStatus, len(o.Sources))
	for i, s := range o.Sources {
		c.st.Sources[i].Source = s
	}
	return c
}

// Status is a copy of the current status.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status()
}

// WaitFirst waits until the clock was first set, every source of the
// first burst failed, ctx ends or max passes, whichever is first, and
// says whether the clock was set.
func (c *Client) WaitFirst(ctx context.Context, max time.Duration) bool {
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-c.first:
		return true
	case <-c.round:
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-c.first:
		return true
	default:
		return false
	}
}

// Run keeps the clock in sync until ctx ends.
func (c *Client) Run(ctx context.Context) {
	log := c.o.Log
	if len(c.o.Sources) == 0 {
		log.Info("no NTP sources; the clock is left as it is")
		close(c.round)
		return
	}
	burst := c.m.Start()
	results := make(chan Sample, len(burst))
	for _, i := range burst {
		safe.Go(log, "ntp-query", func() { results <- c.query(i) }, func(p *safe.Panic) {
			results <- Sample{Source: i, Err: fmt.Errorf("asking %s: %w", c.o.Sources[i].Addr, p)}
		})
	}
	for range burst {
		c.handle(<-results)
	}
	c.m.EndBurst()
	close(c.round)
	if c.m.Chosen() < 0 {
		log.Warn("no NTP server answered; retrying in the background", "sources", len(c.o.Sources))
	}
	for {
		src, wait := c.m.Next()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		c.handle(c.query(src))
	}
}

// query asks source i once.
func (c *Client) query(i int) Sample {
	addr := c.o.Sources[i].Addr
	r, err := ntp.QueryWithOptions(addr, ntp.QueryOptions{Timeout: c.o.Timeout, GetSystemTime: c.o.Now})
	if err == nil {
		err = r.Validate()
	}
	if err != nil {
		return Sample{Source: i, Err: fmt.Errorf("asking NTP server %s: %w", addr, err)}
	}
	return Sample{Source: i, Offset: r.ClockOffset, RTT: r.RTT, RootDistance: r.RootDistance, Stratum: r.Stratum}
}

// handle feeds one sample to the machine, acts on its decision, and
// records the outcome.
func (c *Client) handle(s Sample) {
	log := c.o.Log
	d := c.m.Observe(s)
	src := c.o.Sources[s.Source]
	var aerr error
	e := Estimate{MaxError: d.MaxError, EstError: d.EstError, Poll: d.Poll}
	switch d.Action {
	case Step:
		aerr = c.o.Clock.Step(d.Offset, e)
	case Slew:
		aerr = c.o.Clock.Slew(d.Offset, e)
	}
	now := c.o.Since()

	c.mu.Lock()
	ss := &c.st.Sources[s.Source]
	firstSync := false
	switch {
	case s.Err != nil:
		ss.Failures++
		ss.LastError = s.Err.Error()
		c.noteError(s.Err.Error())
	default:
		ss.Answers++
	}
	if aerr != nil {
		c.noteError(aerr.Error())
	} else if d.Action != None {
		ms := float64(d.Offset.Microseconds()) / 1000
		if !c.st.Synced {
			firstSync = true
			c.st.Synced = true
			c.st.FirstOffsetMs = ms
			c.st.FirstSyncMs = now.Milliseconds()
		}
		if d.Action == Step {
			c.st.Stepped = true
			c.st.StepMs = ms
		}
		c.st.Server, c.st.Stratum, c.st.OffsetMs = src.Addr, s.Stratum, ms
		c.st.LastSyncMs = now.Milliseconds()
		c.st.Syncs++
		c.st.PollS = int64(d.Poll / time.Second)
	}
	st := c.status()
	c.mu.Unlock()

	switch {
	case aerr != nil:
		log.Error("changing the clock failed", "action", d.Action, "server", src.Addr, "offset", d.Offset, "err", aerr)
	case s.Err != nil:
		log.Warn("NTP server did not answer", "server", src.Addr, "origin", src.Origin, "why", d.Reason)
	case d.Action == Step:
		log.Info("clock stepped", "server", src.Addr, "origin", src.Origin, "offset", d.Offset, "stratum", s.Stratum, "rtt", s.RTT, "why", d.Reason)
	case d.Action == Slew && (firstSync || d.Switched):
		log.Info("clock synced", "server", src.Addr, "origin", src.Origin, "offset", d.Offset, "stratum", s.Stratum, "rtt", s.RTT, "poll", d.Poll)
	case d.Action == Slew:
		log.Debug("clock slewed", "server", src.Addr, "offset", d.Offset, "poll", d.Poll, "why", d.Reason)
	}
	if firstSync && aerr == nil {
		close(c.first)
	}
	if c.o.OnChange != nil {
		c.o.OnChange(st)
	}
}

// status is Status with c.mu held.
func (c *Client) status() Status {
	st := c.st
	st.Sources = slices.Clone(c.st.Sources)
	st.Errors = slices.Clone(c.st.Errors)
	return st
}

func (c *Client) noteError(e string) {
	c.st.Errors = append(c.st.Errors, e)
	if n := len(c.st.Errors); n > maxErrors {
		c.st.Errors = slices.Delete(c.st.Errors, 0, n-maxErrors)
	}
}
