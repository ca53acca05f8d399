package network

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/network/resolvconf"
	"github.com/vishvananda/netlink"
)

// Millis is a duration reported in milliseconds.
type Millis float64

func ms(d time.Duration) Millis { return Millis(float64(d.Microseconds()) / 1000) }

// Steps is how long each part of Up took.
type Steps struct {
	LinkWait Millis `json:"linkWaitMs"`
	// Entropy is the wait for the kernel's random pool before DHCP, the
	// part of it the link wait did not already cover.
	Entropy Millis `json:"entropyMs"`
	DHCP    Millis `json:"dhcpMs"`
	Apply   Millis `json:"applyMs"`
	IPv6    Millis `json:"ipv6Ms"`
	Total   Millis `json:"totalMs"`
	// DHCPShare is DHCP / Total: the part of the network phase spent
	// waiting on the DHCP server.
	DHCPShare float64 `json:"dhcpShare"`
}

// Result is the network part of the boot report.
type Result struct {
	Mode      Mode     `json:"mode"`
	Interface string   `json:"interface,omitempty"`
	MAC       string   `json:"mac,omitempty"`
	Addresses []string `json:"addresses,omitempty"`
	Gateway   string   `json:"gateway,omitempty"`
	Routes    []Route  `json:"routes,omitempty"`
	MTU       int      `json:"mtu,omitempty"`
	DNS       []string `json:"dns,omitempty"`
	Search    []string `json:"search,omitempty"`
	Hostname  string   `json:"hostname,omitempty"`
	// NTP are the NTP servers DHCPv4 (option 42) and DHCPv6 (option 56)
	// gave, for the time phase.
	NTP []string `json:"ntp,omitempty"`
	// HostnameSource says where Hostname came from: dhcp or config (the
	// command line). The config phase may set another from IMDS later; the
	// boot report's config section says so.
	HostnameSource string `json:"hostnameSource,omitempty"`
	DHCPServer     string `json:"dhcpServer,omitempty"`
	// DHCPv6Server is the DUID of the server that gave the IPv6 address.
	DHCPv6Server string   `json:"dhcpv6Server,omitempty"`
	LeaseTime    Millis   `json:"leaseTimeMs,omitempty"`
	T1           Millis   `json:"t1Ms,omitempty"`
	T2           Millis   `json:"t2Ms,omitempty"`
	ResolvConf   string   `json:"resolvConf,omitempty"`
	Warnings     []string `json:"warnings,omitempty"`
	Steps        Steps    `json:"steps"`
}

// Up configures the network and returns what it did. With DHCP the
// returned Handle keeps renewing the lease until ctx ends; it is nil for
// static and off. Up itself returns within cfg.Timeout (DefaultTimeout).
// On error the Result still says how far it got, for the boot report; a
// non-nil Handle with an error means the address is up and renewing but
// the hostname or resolv.conf failed.
func Up(ctx context.Context, log *slog.Logger, cfg Config) (res *Result, h *Handle, err error) {
	defer func() {
		// PID 1 must not die of a bug here: turn a panic into an error.
		if r := recover(); r != nil {
			err = fmt.Errorf("network setup panicked: %v", r)
			if res == nil {
				res = &Result{Mode: cfg.Mode}
			}
		}
	}()
	return up(ctx, log, cfg)
}

func up(ctx context.Context, log *slog.Logger, cfg Config) (*Result, *Handle, error) {
	start := time.Now()
	res := &Result{Mode: cfg.Mode}
	if res.Mode == "" {
		res.Mode = ModeDHCP
	}
	defer func() {
		res.Steps.Total = ms(time.Since(start))
		if res.Steps.Total > 0 {
			res.Steps.DHCPShare = float64(res.Steps.DHCP) / float64(res.Steps.Total)
		}
	}()
	timeout := orDefault(cfg.Timeout, DefaultTimeout)
	uctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	e, err := newEnv(cfg.NetNS)
	if err != nil {
		return res, nil, err
	}
	keepEnv := false
	defer func() {
		if !keepEnv {
			e.close()
		}
	}()
	if err := e.loUp(); err != nil {
		return res, nil, err
	}
	if res.Mode == ModeOff {
		log.Info("network off: only lo is up")
		return res, nil, nil
	}

	var crng <-chan error
	if res.Mode == ModeDHCP {
		crng = startCRNG()
	}
	t := time.Now()
	lctx, lcancel := context.WithTimeout(uctx, orDefault(cfg.LinkTimeout, DefaultLinkTimeout))
	link, err := e.waitLink(lctx, log, cfg.Interface)
	lcancel()
	res.Steps.LinkWait = ms(time.Since(t))
	if err != nil {
		return res, nil, err
	}
	attrs := link.Attrs()
	res.Interface, res.MAC = attrs.Name, attrs.HardwareAddr.String()
	e.enableRA(log, attrs.Name)

	n := nameFacts{hostname: cfg.Hostname, dns: cfg.DNS, search: cfg.Search}
	var h *Handle
	switch res.Mode {
	case ModeStatic:
		if err := e.upStatic(log, cfg, link, res); err != nil {
			return res, nil, err
		}
	case ModeDHCP:
		if h, err = e.upDHCP4(ctx, uctx, log, cfg, link, crng, res, &n); err != nil {
			return res, nil, err
		}
		keepEnv = true // the renewer owns it now
	default:
		return res, nil, fmt.Errorf("network mode %q: want dhcp, static or off", res.Mode)
	}
	if l, err := e.nl.LinkByIndex(attrs.Index); err == nil {
		res.MTU = l.Attrs().MTU
	}
	if cfg.IPv6 {
		e.upIPv6(ctx, uctx, log, cfg, link, res, &n)
	}
	errs := applyNames(cfg, h, res, n)
	log.Info("network up", "mode", res.Mode, "interface", res.Interface, "addresses", res.Addresses,
		"gateway", res.Gateway, "mtu", res.MTU, "dns", res.DNS, "dhcp_server", res.DHCPServer,
		"took", time.Since(start).Round(time.Millisecond))
	// The address is up even if the hostname or resolv.conf failed: the
	// handle is returned with the error so renewals go on.
	return res, h, errors.Join(errs...)
}

// nameFacts is what the addressing steps found to name the node and resolve
// names with: the config's, then DHCPv4's and DHCPv6's added.
type nameFacts struct {
	hostname string
	dns      []netip.Addr
	domain   string
	search   []string
	// dns6 and search6 are DHCPv6's alone, which the renewer keeps
	// beside each DHCPv4 lease's.
	dns6    []netip.Addr
	search6 []string
}

// upStatic gives the link the config's address and gateway.
func (e *env) upStatic(log *slog.Logger, cfg Config, link netlink.Link, res *Result) error {
	t := time.Now()
	var routes []Route
	if cfg.Gateway.IsValid() {
		routes = []Route{{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Gateway: cfg.Gateway}}
		res.Gateway = cfg.Gateway.String()
	}
	routes = append(routes, cfg.Routes...)
	a := Addressing{Address: cfg.Address, Routes: routes, MTU: cfg.MTU}
	if err := e.apply(log, link, a, netip.Prefix{}); err != nil {
		return err
	}
	res.Steps.Apply = ms(time.Since(t))
	res.Addresses = []string{cfg.Address.String()}
	res.Routes = routes
	return nil
}

// upDHCP4 gets a DHCPv4 lease (once the kernel's random pool is ready),
// applies it, and starts its renewer, which from then on owns e: the
// handle it returns. What the lease says of names goes into n.
func (e *env) upDHCP4(ctx, uctx context.Context, log *slog.Logger, cfg Config, link netlink.Link, crng <-chan error, res *Result, n *nameFacts) (*Handle, error) {
	attrs := link.Attrs()
	t := time.Now()
	if err := awaitCRNG(uctx, crng); err != nil {
		return nil, fmt.Errorf("DHCPv4 on %s: %w", attrs.Name, err)
	}
	res.Steps.Entropy = ms(time.Since(t))
	t = time.Now()
	raw, err := e.dora(uctx, log, attrs.Name, attrs.HardwareAddr)
	res.Steps.DHCP = ms(time.Since(t))
	if err != nil {
		return nil, err
	}
	lease, err := LeaseFromACK(raw.ACK, raw.CreationTime)
	if err != nil {
		return nil, fmt.Errorf("DHCPv4 on %s: %w", attrs.Name, err)
	}
	res.Warnings = append(res.Warnings, lease.Warnings...)
	for _, w := range lease.Warnings {
		log.Warn("DHCP option ignored", "interface", attrs.Name, "why", w)
	}
	h := &Handle{e: e, link: link, mac: attrs.HardwareAddr, mtu: cfg.MTU,
		minRetry: orDefault(cfg.MinRetry, time.Second), done: make(chan struct{})}
	t = time.Now()
	if err := e.apply(log, link, h.addressing(lease, time.Now()), netip.Prefix{}); err != nil {
		return nil, err
	}
	res.Steps.Apply = ms(time.Since(t))
	h.set(lease, true, false)
	h.dns = &dnsState{path: cfg.ResolvConfPath, extraDNS: slices.Clone(cfg.DNS), extraSearch: slices.Clone(cfg.Search)}
	h.dns.setLease(lease)
	safe.Go(log, "dhcp-renew", func() { h.run(ctx, log, raw, lease) }, func(p *safe.Panic) {
		log.Error("the DHCP lease is no longer renewed; the address goes when it expires", "err", p)
	})
	res.Addresses = []string{lease.Address.String()}
	res.Routes = lease.Routes
	if lease.Router.IsValid() {
		res.Gateway = lease.Router.String()
	}
	res.DHCPServer = lease.Server.String()
	for _, a := range lease.NTP {
		res.NTP = append(res.NTP, a.String())
	}
	res.LeaseTime, res.T1, res.T2 = ms(lease.Time), ms(lease.T1), ms(lease.T2)
	if n.hostname == "" && lease.Hostname != "" {
		n.hostname = lease.Hostname
		res.HostnameSource = "dhcp"
	}
	n.dns = append(append([]netip.Addr(nil), lease.DNS...), cfg.DNS...)
	n.domain, n.search = lease.Domain, slices.Concat(lease.Search, cfg.Search)
	return h, nil
}

// upIPv6 waits, bounded, for an IPv6 address by DHCPv6 or router
// advertisements; none in time is a warning, IPv4 goes on alone.
func (e *env) upIPv6(ctx, uctx context.Context, log *slog.Logger, cfg Config, link netlink.Link, res *Result, n *nameFacts) {
	attrs := link.Attrs()
	t := time.Now()
	ictx, icancel := context.WithTimeout(uctx, orDefault(cfg.IPv6Timeout, DefaultIPv6Timeout))
	defer icancel()
	defer func() { res.Steps.IPv6 = ms(time.Since(t)) }()
	if cfg.DHCPv6 {
		if err := waitCRNG(ictx); err != nil {
			log.Warn("DHCPv6 skipped", "interface", attrs.Name, "err", err)
		}
		l6, err := e.up6(ictx, ctx, log, cfg, link)
		if err != nil {
			log.Warn("no DHCPv6 lease in time; going on with IPv4", "interface", attrs.Name,
				"waited", time.Since(t).Round(time.Millisecond), "err", err)
			return
		}
		res.Warnings = append(res.Warnings, l6.Warnings...)
		for _, w := range l6.Warnings {
			log.Warn("DHCPv6 option ignored", "interface", attrs.Name, "why", w)
		}
		res.Addresses = append(res.Addresses, netip.PrefixFrom(l6.Address, 128).String())
		res.DHCPv6Server = l6.Server
		for _, a := range l6.NTP {
			res.NTP = append(res.NTP, a.String())
		}
		n.dns = append(n.dns, l6.DNS...)
		n.search = append(n.search, l6.Search...)
		n.dns6, n.search6 = l6.DNS, l6.Search
		return
	}
	if addrs, ok := e.waitSLAAC(ictx, link); ok {
		for _, a := range addrs {
			res.Addresses = append(res.Addresses, a.IPNet.String())
		}
		return
	}
	log.Warn("no IPv6 address from router advertisements in time; going on with IPv4",
		"interface", attrs.Name, "waited", time.Since(t).Round(time.Millisecond))
}

// applyNames sets the hostname and writes resolv.conf from n; with a
// DHCPv4 renewer (h), from the renewer's state, under its lock.
func applyNames(cfg Config, h *Handle, res *Result, n nameFacts) []error {
	var errs []error
	if n.hostname != "" && cfg.SetHostname != nil {
		if err := cfg.SetHostname(n.hostname); err != nil {
			errs = append(errs, err)
		} else {
			res.Hostname = n.hostname
			if res.HostnameSource == "" {
				res.HostnameSource = "config"
			}
		}
	}
	rc, err := resolvconf.Merge(n.dns, n.domain, n.search, nil, nil)
	if h != nil {
		// From here on the renewer's state is the one to render (a short
		// lease may already have been renewed), and holding its lock
		// keeps this write from landing over a renewal's newer one.
		h.dns.mu.Lock()
		defer h.dns.mu.Unlock()
		h.dns.extraDNS = append(h.dns.extraDNS, n.dns6...)
		h.dns.extraSearch = append(h.dns.extraSearch, n.search6...)
		rc, err = h.dns.file()
	}
	if err != nil {
		return append(errs, err)
	}
	for _, a := range rc.Nameservers {
		res.DNS = append(res.DNS, a.String())
	}
	res.Search = rc.Search
	if cfg.ResolvConfPath != "" {
		if err := resolvconf.Write(cfg.ResolvConfPath, rc); err != nil {
			errs = append(errs, err)
		} else {
			res.ResolvConf = cfg.ResolvConfPath
		}
	}
	return errs
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// up6 takes a DHCPv6 address within ctx and starts keeping it under the
// long-lived ctx given to Up (cfg's caller), in its own netlink handle.
func (e *env) up6(ctx, keepCtx context.Context, log *slog.Logger, cfg Config, link netlink.Link) (Lease6, error) {
	attrs := link.Attrs()
	sent := time.Now()
	m, err := e.dhcp6(ctx, log, attrs.Name, attrs.HardwareAddr)
	if err != nil {
		return Lease6{}, err
	}
	l6, err := Lease6FromReply(m, sent)
	if err != nil {
		return Lease6{}, fmt.Errorf("DHCPv6 on %s: %w", attrs.Name, err)
	}
	if err := e.apply6(link, l6, time.Now()); err != nil {
		return Lease6{}, err
	}
	e6, err := newEnv(cfg.NetNS)
	if err != nil {
		return l6, err
	}
	safe.Go(log, "dhcpv6-renew", func() { keep6(keepCtx, log, e6, link, l6) }, func(p *safe.Panic) {
		log.Error("the DHCPv6 address is no longer renewed; it goes when its valid lifetime ends", "interface", attrs.Name, "err", p)
	})
	return l6, nil
}
