package bottlerocket

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/berth-node/berth/config/fate"
)

// reader turns the decoded document into Settings, one setting at a time,
// collecting problems.
type reader struct {
	lines    map[string]int
	s        *Settings
	problems []Problem

	// What finish needs once every setting is read.
	kubernetes    bool   // there is a settings.kubernetes table
	clusterDNS    bool   // settings.kubernetes.cluster-dns-ip was given
	authMode      string // settings.kubernetes.authentication-mode
	token         string // settings.kubernetes.bootstrap-token, checked
	tokenGiven    bool
	clusterDomain string
	httpsProxy    string
	noProxy       []string
	proxyGiven    bool
}

func (r *reader) add(sev Severity, path, msg string, unknown bool) {
	r.problems = append(r.problems, Problem{
		Severity: sev,
		Path:     clipPath(path),
		Line:     r.lines[path],
		Message:  clipMessage(msg),
		Unknown:  unknown,
	})
}

func (r *reader) errorf(path, format string, args ...any) {
	r.add(SeverityError, path, fmt.Sprintf(format, args...), false)
}

func (r *reader) warnf(path, format string, args ...any) {
	r.add(SeverityWarning, path, fmt.Sprintf(format, args...), false)
}

// unknown warns of a setting no row of Table covers; hint, if any, says
// what was probably meant.
func (r *reader) unknown(path, hint string) {
	msg := "not a setting berth knows; ignored"
	if hint != "" {
		msg += " (" + hint + ")"
	}
	r.add(SeverityWarning, path, msg, true)
}

// fate reports the setting at path as Table's row key has it: a warning
// when ignored, an error when refused. A key missing from Table, or
// honoured there, is a bug here, reported as an error so that tests see
// it.
func (r *reader) fate(path, key string) {
	row, ok := Lookup(key)
	switch {
	case ok && row.Fate == fate.Refused:
		r.errorf(path, "refused: %s", row.Why)
	case ok && row.Fate == fate.Ignored:
		r.warnf(path, "ignored: %s", row.Why)
	default:
		r.errorf(path, "bottlerocket: no ignored or refused Table row %s", key)
	}
}

// settings reads the settings table, one namespace at a time.
func (r *reader) settings(m map[string]any) {
	for _, ns := range sortedKeys(m) {
		path, v := join("settings", ns), m[ns]
		key := "settings." + ns
		// A quoted key with dots ("kubernetes.max-pods") is not a
		// namespace, and must not match a deeper row.
		if _, ok := Lookup(key); ok && !strings.ContainsAny(ns, ".<") {
			r.fate(path, key)
			continue
		}
		var each func(path, key string, v any) bool
		switch ns {
		case "kubernetes":
			each = r.kubernetesKey
		case "aws":
			each = r.awsKey
		case "container-registry":
			each = r.registryKey
		case "dns":
			each = r.dnsKey
		case "kernel":
			each = r.kernelKey
		case "network":
			each = r.networkKey
		case "ntp":
			each = r.ntpKey
		case "updates":
			each = r.updatesKey
		case "host-containers":
			each = r.hostContainer
		case "bootstrap-containers", "bootstrap-commands":
			each = func(path, name string, v any) bool { return r.bootstrap(path, key, v) }
		default:
			r.unknown(path, "")
			continue
		}
		t, ok := r.table(path, v)
		if !ok {
			continue
		}
		r.kubernetes = r.kubernetes || ns == "kubernetes"
		for _, k := range sortedKeys(t) {
			p := join(path, k)
			if !each(p, k, t[k]) {
				r.unknown(p, "")
			}
		}
	}
}

// kubernetesKey reads one key of settings.kubernetes; false if unknown.
func (r *reader) kubernetesKey(p, key string, v any) bool {
	s := r.s
	c := &s.Kubelet.Config
	switch key {
	case "api-server":
		if u, ok := r.str(p, v, httpsURL); ok {
			s.Cluster.APIServerEndpoint = u
		}
	case "cluster-certificate":
		if pem, ok := r.certificate(p, v); ok {
			s.Cluster.CertificateAuthority = pem
		}
	case "cluster-name":
		s.Cluster.Name, _ = r.str(p, v, clusterName)
	case "cluster-dns-ip":
		r.clusterDNS = true
		c.ClusterDNS = r.oneOrMore(p, v, ipNoZone)
	case "cluster-domain":
		if d, ok := r.str(p, v, clusterDomain); ok {
			c.ClusterDomain, r.clusterDomain = d, d
		}
	case "max-pods":
		c.MaxPods = r.int32(p, v, 0)
	case "node-labels":
		s.Kubelet.NodeLabels = r.labels(p, v)
	case "node-taints":
		s.Kubelet.Taints = r.taints(p, v)
	case "node-ip":
		s.Kubelet.NodeIP, _ = r.str(p, v, ipNoZone)
	case "hostname-override":
		s.Kubelet.HostnameOverride, _ = r.str(p, v, nodeName)
	case "hostname-override-source":
		if src, ok := r.str(p, v, oneOf("private-dns-name", "instance-id")); ok && src == "instance-id" {
			s.FeatureGates = map[string]bool{"InstanceIdNodeName": true}
		}
	case "provider-id":
		c.ProviderID, _ = r.str(p, v, noSpace)
	case "authentication-mode":
		r.authMode, _ = r.str(p, v, oneOf("aws", "tls"))
	case "bootstrap-token":
		r.tokenGiven = true
		r.token, _ = r.secret(p, v, bootstrapToken)
	case "standalone-mode":
		if b, ok := r.boolean(p, v); ok && b {
			r.fate(p, "settings.kubernetes.standalone-mode")
		}
	case "cloud-provider":
		if cp, ok := r.str(p, v, oneOf("external", "aws", "")); ok && cp != "external" {
			r.warnf(p, "%q: berth always runs kubelet with --cloud-provider=external (the in-tree aws provider left Kubernetes in 1.27)", cp)
		}
	case "server-tls-bootstrap":
		c.ServerTLSBootstrap = r.boolPtr(p, v)
	case "static-pods":
		r.staticPods(p, v)
	case "eviction-hard":
		c.EvictionHard = r.stringMap(p, v, evictionSignal, threshold)
	case "eviction-soft":
		c.EvictionSoft = r.stringMap(p, v, evictionSignal, threshold)
	case "eviction-soft-grace-period":
		c.EvictionSoftGracePeriod = r.stringMap(p, v, evictionSignal, duration)
	case "eviction-max-pod-grace-period":
		c.EvictionMaxPodGracePeriod = r.int32(p, v, 0)
	case "kube-reserved":
		c.KubeReserved = r.stringMap(p, v, oneOf("cpu", "memory", "ephemeral-storage", "pid"), quantity)
	case "system-reserved":
		c.SystemReserved = r.stringMap(p, v, oneOf("cpu", "memory", "ephemeral-storage", "pid"), quantity)
	case "reserved-cpus":
		c.ReservedSystemCPUs, _ = r.str(p, v, cpuSet)
	case "allowed-unsafe-sysctls":
		c.AllowedUnsafeSysctls = r.list(p, v, unsafeSysctl)
	case "registry-qps":
		c.RegistryPullQPS = r.int32(p, v, -1<<31)
	case "registry-burst":
		c.RegistryBurst = r.int32(p, v, -1<<31)
	case "event-qps":
		c.EventRecordQPS = r.int32(p, v, -1<<31)
	case "event-burst":
		c.EventBurst = r.int32(p, v, -1<<31)
	case "kube-api-qps":
		c.KubeAPIQPS = r.int32(p, v, -1<<31)
	case "kube-api-burst":
		c.KubeAPIBurst = r.int32(p, v, -1<<31)
	case "container-log-max-size":
		c.ContainerLogMaxSize, _ = r.str(p, v, quantity)
	case "container-log-max-files":
		c.ContainerLogMaxFiles = r.int32(p, v, -1<<31)
	case "container-log-max-workers":
		c.ContainerLogMaxWorkers = r.int32(p, v, -1<<31)
	case "container-log-monitor-interval":
		c.ContainerLogMonitorInterval, _ = r.str(p, v, duration)
	case "cpu-cfs-quota-enforced":
		c.CPUCFSQuota = r.boolPtr(p, v)
	case "cpu-manager-policy":
		// Bottlerocket takes Static and None too; kubelet only lower case.
		if pol, ok := r.str(p, v, oneOf("static", "none", "Static", "None")); ok {
			c.CPUManagerPolicy = strings.ToLower(pol)
		}
	case "cpu-manager-policy-options":
		// The options Bottlerocket's kubelet-config template writes.
		for _, o := range r.list(p, v, oneOf("full-pcpus-only", "strict-cpu-reservation", "distribute-cpus-across-numa")) {
			if c.CPUManagerPolicyOptions == nil {
				c.CPUManagerPolicyOptions = map[string]string{}
			}
			c.CPUManagerPolicyOptions[o] = "true"
		}
	case "cpu-manager-reconcile-period":
		c.CPUManagerReconcilePeriod, _ = r.str(p, v, duration)
	case "topology-manager-policy":
		c.TopologyManagerPolicy, _ = r.str(p, v, oneOf("none", "restricted", "best-effort", "single-numa-node"))
	case "topology-manager-scope":
		c.TopologyManagerScope, _ = r.str(p, v, oneOf("container", "pod"))
	case "memory-manager-policy":
		// Kubelet wants Static or None; Bottlerocket takes either case.
		if pol, ok := r.str(p, v, oneOf("Static", "None", "static", "none")); ok {
			c.MemoryManagerPolicy = strings.ToUpper(pol[:1]) + pol[1:]
		}
	case "memory-manager-reserved-memory":
		c.ReservedMemory = r.reservedMemory(p, v)
	case "pod-pids-limit":
		if n, ok := r.integer(p, v, -1, 1<<63-1); ok {
			c.PodPidsLimit = &n
		}
	case "image-gc-high-threshold-percent":
		c.ImageGCHighThresholdPercent = r.percent(p, v)
	case "image-gc-low-threshold-percent":
		c.ImageGCLowThresholdPercent = r.percent(p, v)
	case "image-minimum-gc-age":
		c.ImageMinimumGCAge, _ = r.str(p, v, duration)
	case "image-maximum-gc-age":
		c.ImageMaximumGCAge, _ = r.str(p, v, duration)
	case "max-parallel-image-pulls":
		if n := r.int32(p, v, 1); n != nil {
			serial := false
			c.MaxParallelImagePulls, c.SerializeImagePulls = n, &serial
		}
	case "ids-per-pod":
		if n, ok := r.integer(p, v, 1, 1<<63-1); ok {
			c.UserNamespaces = &UserNamespaces{IDsPerPod: n}
		}
	case "shutdown-grace-period":
		c.ShutdownGracePeriod, _ = r.str(p, v, duration)
	case "shutdown-grace-period-for-critical-pods":
		c.ShutdownGracePeriodCriticalPods, _ = r.str(p, v, duration)
	case "seccomp-default":
		c.SeccompDefault = r.boolPtr(p, v)
	case "single-process-oom-kill":
		c.SingleProcessOOMKill = r.boolPtr(p, v)
	case "memory-swap-behavior":
		if b, ok := r.str(p, v, oneOf("NoSwap", "LimitedSwap")); ok {
			c.MemorySwap = &MemorySwap{SwapBehavior: b}
		}
	case "log-level":
		if n, ok := r.integer(p, v, 0, 255); ok {
			l := int(n)
			s.Kubelet.Verbosity = &l
		}
	case "server-certificate", "server-key", "credential-providers", "static-pods-enabled",
		"device-ownership-from-security-context", "pod-infra-container-image":
		r.fate(p, "settings.kubernetes."+key)
	default:
		return false
	}
	return true
}

// staticPods reads settings.kubernetes.static-pods: an enabled pod is
// refused, a disabled one only noted.
func (r *reader) staticPods(p string, v any) {
	t, ok := r.table(p, v)
	if !ok {
		return
	}
	for _, name := range sortedKeys(t) {
		np := join(p, name)
		pod, ok := r.table(np, t[name])
		if !ok {
			continue
		}
		enabled, _ := r.optBool(join(np, "enabled"), pod["enabled"])
		if enabled {
			r.fate(np, "settings.kubernetes.static-pods.<name>")
		} else {
			r.warnf(np, "ignored: not enabled, and berth runs no static pods from user data")
		}
	}
}

// reservedMemory reads settings.kubernetes.memory-manager-reserved-memory:
// NUMA node -> {enabled, memory, hugepages-2Mi, hugepages-1Gi}; as in
// Bottlerocket's kubelet-config template, only enabled nodes count.
func (r *reader) reservedMemory(p string, v any) []MemoryReservation {
	t, ok := r.table(p, v)
	if !ok {
		return nil
	}
	var out []MemoryReservation
	for _, node := range sortedKeys(t) {
		np := join(p, node)
		n, err := strconv.ParseInt(node, 10, 32)
		if err != nil || n < 0 {
			r.errorf(np, "want a NUMA node number as the key, got %s", quoteClipped(node))
			continue
		}
		e, ok := r.table(np, t[node])
		if !ok {
			continue
		}
		res := MemoryReservation{NUMANode: int32(n), Limits: map[string]string{}}
		enabled := false
		for _, k := range sortedKeys(e) {
			kp := join(np, k)
			switch k {
			case "enabled":
				enabled, _ = r.optBool(kp, e[k])
			case "memory", "hugepages-2Mi", "hugepages-1Gi":
				if q, ok := r.str(kp, e[k], quantity); ok {
					res.Limits[k] = q
				}
			default:
				r.unknown(kp, "")
			}
		}
		if enabled && len(res.Limits) > 0 {
			out = append(out, res)
		}
	}
	slices.SortFunc(out, func(a, b MemoryReservation) int { return cmp.Compare(a.NUMANode, b.NUMANode) })
	return out
}

// labels reads settings.kubernetes.node-labels: label key -> value.
func (r *reader) labels(p string, v any) map[string]string {
	return r.stringMap(p, v, labelKey, labelValue)
}

// taints reads settings.kubernetes.node-taints: label key -> list of
// "VALUE:EFFECT" (or one such string, which Bottlerocket still takes).
func (r *reader) taints(p string, v any) []Taint {
	t, ok := r.table(p, v)
	if !ok {
		return nil
	}
	var out []Taint
	for _, key := range sortedKeys(t) {
		kp := join(p, key)
		if err := labelKey(key); err != nil {
			r.errorf(kp, "taint key: %v", err)
			continue
		}
		one := func(ep string, s string) {
			value, effect, ok := strings.Cut(s, ":")
			taint := Taint{Key: key, Value: value, Effect: effect}
			if !ok {
				r.errorf(ep, "want VALUE:EFFECT (or :EFFECT), got %s", quoteClipped(s))
				return
			}
			if err := taintSyntax(taint.String()); err != nil {
				r.errorf(ep, "%v", err)
				return
			}
			out = append(out, taint)
		}
		switch tv := t[key].(type) {
		case string:
			if s, ok := r.str(kp, tv, nil); ok {
				one(kp, s)
			}
		case []any:
			for i, e := range tv {
				ep := indexed(kp, i)
				if s, ok := r.str(ep, e, nil); ok {
					one(ep, s)
				}
			}
		default:
			r.errorf(kp, "want a list of \"VALUE:EFFECT\" strings, got %s", describe(tv))
		}
	}
	return out
}

// certificate reads settings.kubernetes.cluster-certificate: base64 of a
// PEM bundle with at least one certificate.
func (r *reader) certificate(p string, v any) ([]byte, bool) {
	s, ok := v.(string)
	if !ok {
		r.errorf(p, "want a string, got %s", describe(v))
		return nil, false
	}
	ca, err := decodeCA(s)
	if err != nil {
		r.errorf(p, "%v", err)
		return nil, false
	}
	return ca, true
}

// awsKey reads one key of settings.aws; false if unknown.
func (r *reader) awsKey(p, key string, _ any) bool {
	switch key {
	case "region", "config", "credentials", "profile":
		r.fate(p, "settings.aws."+key)
		return true
	}
	return false
}

// registryKey reads one key of settings.container-registry.
func (r *reader) registryKey(p, key string, v any) bool {
	switch key {
	case "mirrors":
		r.mirrors(p, v)
	case "credentials", "creds": // creds: Bottlerocket's alias
		r.fate(p, "settings.container-registry.credentials")
	default:
		return false
	}
	return true
}

// mirrors reads settings.container-registry.mirrors in either of
// Bottlerocket's forms: a list of {registry, endpoint} tables, or the
// older table of registry = [endpoints].
func (r *reader) mirrors(p string, v any) {
	add := func(rp, ep string, registry string, endpoints []string) {
		if r.s.RegistryMirrors == nil {
			r.s.RegistryMirrors = map[string][]string{}
		}
		if _, dup := r.s.RegistryMirrors[registry]; dup {
			r.errorf(rp, "registry %s has mirrors already; give each registry once, with all its endpoints", quoteClipped(registry))
			return
		}
		if len(endpoints) == 0 {
			r.errorf(ep, "registry %s has no endpoint: want at least one mirror URL", quoteClipped(registry))
			return
		}
		r.s.RegistryMirrors[registry] = endpoints
	}
	switch m := v.(type) {
	case []any:
		for i, e := range m {
			mp := indexed(p, i)
			t, ok := r.table(mp, e)
			if !ok {
				continue
			}
			// registry and endpoints stay empty when bad (and reported).
			var registry string
			var endpoints []string
			endpointsOK := false
			for _, k := range sortedKeys(t) {
				kp := join(mp, k)
				switch k {
				case "registry":
					registry, _ = r.str(kp, t[k], registryHost)
				case "endpoint":
					endpoints, endpointsOK = r.strings(kp, t[k], mirrorURL)
				case "capabilities":
					r.warnf(kp, "ignored: berth's mirrors pull and resolve, as containerd's hosts.toml does by default")
				default:
					hint := ""
					if k == "endpoints" {
						hint = "Bottlerocket's key is endpoint"
					}
					r.unknown(kp, hint)
				}
			}
			_, hasRegistry := t["registry"]
			_, hasEndpoint := t["endpoint"]
			switch {
			case !hasRegistry:
				r.errorf(mp, "no registry: want registry = \"HOST\" (or \"*\")")
			case !hasEndpoint:
				r.errorf(mp, "no endpoint: want endpoint = [\"https://MIRROR\", ...]")
			case registry != "" && endpointsOK:
				add(mp, join(mp, "endpoint"), registry, endpoints)
			}
		}
	case map[string]any:
		for _, reg := range sortedKeys(m) {
			rp := join(p, reg)
			if err := registryHost(reg); err != nil {
				r.errorf(rp, "%v", err)
				continue
			}
			if eps, ok := r.strings(rp, m[reg], mirrorURL); ok {
				add(rp, rp, reg, eps)
			}
		}
	default:
		r.errorf(p, "want a list of tables ([[settings.container-registry.mirrors]]), got %s", describe(v))
	}
}

// dnsKey reads one key of settings.dns.
func (r *reader) dnsKey(p, key string, v any) bool {
	switch key {
	case "name-servers":
		r.s.Instance.Nameservers = r.list(p, v, ipMaybeZone)
	case "search-list":
		r.s.Instance.SearchDomains = r.list(p, v, dnsName)
	default:
		return false
	}
	return true
}

// kernelKey reads one key of settings.kernel.
func (r *reader) kernelKey(p, key string, v any) bool {
	switch key {
	case "sysctl":
		r.sysctls(p, v)
	case "modules":
		r.modules(p, v)
	case "lockdown", "hugepages", "drivers":
		r.fate(p, "settings.kernel."+key)
	default:
		return false
	}
	return true
}

// sysctls reads settings.kernel.sysctl: name -> value, both strings. A
// name given both with '.' and with '/' is one key (the same file under
// /proc/sys), so the second is an error.
func (r *reader) sysctls(p string, v any) {
	m := r.stringMap(p, v, sysctlKey, sysctlValue)
	if len(m) > MaxSysctls {
		r.errorf(p, "%d sysctls, more than %d", len(m), MaxSysctls)
		return
	}
	seen := map[string]string{}
	for _, k := range sortedKeys(m) {
		canon := strings.ReplaceAll(k, "/", ".")
		if first, ok := seen[canon]; ok {
			r.errorf(join(p, k), "the same sysctl as %s", quoteClipped(first))
			return
		}
		seen[canon] = k
	}
	r.s.Instance.Sysctls = m
}

// modules reads settings.kernel.modules: name -> {allowed, autoload}. A
// module with autoload = true is loaded at boot (Instance.KernelModules),
// one with allowed = false is blocked (Instance.BlockedModules); both at
// once is an error.
func (r *reader) modules(p string, v any) {
	t, ok := r.table(p, v)
	if !ok {
		return
	}
	for _, name := range sortedKeys(t) {
		np := join(p, name)
		if err := moduleName(name); err != nil {
			r.errorf(np, "%v", err)
			continue
		}
		m, ok := r.table(np, t[name])
		if !ok {
			continue
		}
		allowed, autoload := true, false
		for _, k := range sortedKeys(m) {
			kp := join(np, k)
			switch k {
			case "allowed":
				if b, ok := r.boolean(kp, m[k]); ok {
					allowed = b
				}
			case "autoload":
				autoload, _ = r.boolean(kp, m[k])
			default:
				r.unknown(kp, "")
			}
		}
		switch {
		case !allowed && autoload:
			r.errorf(np, "autoload = true with allowed = false: a module cannot be both loaded and blocked")
		case !allowed:
			if len(r.s.Instance.BlockedModules) == MaxKernelModules {
				r.errorf(np, "more than %d modules to block", MaxKernelModules)
				continue
			}
			r.s.Instance.BlockedModules = append(r.s.Instance.BlockedModules, name)
		case autoload:
			if len(r.s.Instance.KernelModules) == MaxKernelModules {
				r.errorf(np, "more than %d modules to load", MaxKernelModules)
				continue
			}
			r.s.Instance.KernelModules = append(r.s.Instance.KernelModules, name)
		}
	}
}

// networkKey reads one key of settings.network.
func (r *reader) networkKey(p, key string, v any) bool {
	switch key {
	case "hostname":
		r.s.Instance.Hostname, _ = r.str(p, v, hostname)
	case "https-proxy":
		r.proxyGiven = true
		r.httpsProxy, _ = r.str(p, v, proxyURL)
	case "no-proxy":
		r.proxyGiven = true
		r.noProxy = r.list(p, v, noProxyEntry)
	case "hosts", "disable-ipv6":
		r.fate(p, "settings.network."+key)
	default:
		return false
	}
	return true
}

// ntpKey reads one key of settings.ntp.
func (r *reader) ntpKey(p, key string, v any) bool {
	switch key {
	case "time-servers":
		r.timeServers(p, v)
	case "options", "logging":
		r.fate(p, "settings.ntp."+key)
	default:
		return false
	}
	return true
}

// updatesKey reads one key of settings.updates.
func (r *reader) updatesKey(p, key string, v any) bool {
	switch key {
	case "metadata-base-url":
		r.s.Instance.UpdateRepository, _ = r.str(p, v, updateURL)
	case "targets-base-url":
		r.s.Instance.UpdateTargetsURL, _ = r.str(p, v, updateURL)
	case "seed", "version-lock", "ignore-waves":
		r.fate(p, "settings.updates."+key)
	default:
		return false
	}
	return true
}

// timeServers reads settings.ntp.time-servers in Bottlerocket's three
// forms: a list of servers, a list of {address, directive, options}
// tables, or a table of such tables by name. The addresses are
// Instance.TimeServers, in order; a table's directive and options are
// chrony's, which berth's NTP client does not take, so each is a warning.
func (r *reader) timeServers(p string, v any) {
	var servers []string
	add := func(sp string, s string) {
		switch {
		case slices.Contains(servers, s):
			r.warnf(sp, "ignored: %s is listed already", quoteClipped(s))
		case len(servers) == MaxTimeServers:
			r.errorf(sp, "more than %d time servers", MaxTimeServers)
		default:
			servers = append(servers, s)
		}
	}
	object := func(op string, o any) {
		t, ok := r.table(op, o)
		if !ok {
			return
		}
		if _, ok := t["address"]; !ok {
			r.errorf(op, "no address: want address = \"HOST\"")
		}
		for _, k := range sortedKeys(t) {
			kp := join(op, k)
			switch k {
			case "address":
				if s, ok := r.str(kp, t[k], timeServer); ok {
					add(kp, s)
				}
			case "directive", "options":
				r.warnf(kp, "ignored: berth's NTP client takes no chrony %s; it asks the address on port 123", k)
			default:
				r.unknown(kp, "")
			}
		}
	}
	switch l := v.(type) {
	case []any:
		strs := slices.ContainsFunc(l, func(e any) bool { _, ok := e.(string); return ok })
		tables := slices.ContainsFunc(l, func(e any) bool { _, ok := e.(map[string]any); return ok })
		if strs && tables {
			r.errorf(p, "mixes server names and tables; use one form")
			return
		}
		for i, e := range l {
			ep := indexed(p, i)
			if _, ok := e.(map[string]any); ok {
				object(ep, e)
			} else if s, ok := r.str(ep, e, timeServer); ok {
				add(ep, s)
			}
		}
	case map[string]any:
		for _, name := range sortedKeys(l) {
			object(join(p, name), l[name])
		}
	default:
		r.errorf(p, "want a list of servers, got %s", describe(v))
	}
	r.s.Instance.TimeServers = servers
}

// hostContainer reads one settings.host-containers.NAME: admin and
// control are Bottlerocket's own and only noted; any other enabled host
// container is the user's software, which berth cannot run.
func (r *reader) hostContainer(p, name string, v any) bool {
	if name == "admin" || name == "control" {
		r.fate(p, "settings.host-containers."+name)
		return true
	}
	t, ok := r.table(p, v)
	if !ok {
		return true
	}
	if enabled, _ := r.optBool(join(p, "enabled"), t["enabled"]); enabled {
		r.fate(p, "settings.host-containers.<name>")
	} else {
		r.warnf(p, "ignored: not enabled, and berth runs no host containers")
	}
	return true
}

// bootstrap reads one settings.bootstrap-containers.NAME or
// settings.bootstrap-commands.NAME: refused unless its mode is "off"
// (Bottlerocket's default).
func (r *reader) bootstrap(p, ns string, v any) bool {
	t, ok := r.table(p, v)
	if !ok {
		return true
	}
	mode := "off"
	if m, there := t["mode"]; there {
		if mode, ok = r.str(join(p, "mode"), m, oneOf("off", "once", "always")); !ok {
			return true
		}
	}
	if mode == "off" {
		r.warnf(p, "ignored: mode is \"off\"")
		return true
	}
	r.fate(p, ns+".<name>")
	return true
}

// finish checks what spans settings and fills what depends on several.
func (r *reader) finish() {
	s := r.s
	switch {
	case r.authMode == "tls" && r.token == "" && !r.tokenGiven:
		r.errorf("settings.kubernetes.authentication-mode", "\"tls\" joins with a bootstrap token: set settings.kubernetes.bootstrap-token")
	case r.authMode == "tls":
		s.Cluster.BootstrapToken = r.token
	case r.tokenGiven:
		r.warnf("settings.kubernetes.bootstrap-token", "ignored: authentication-mode is not \"tls\", so Bottlerocket ignores the token too and berth joins with the EKS exec credential plugin")
	}
	if r.kubernetes && !r.clusterDNS {
		r.problems = append(r.problems, Problem{
			Severity: SeverityWarning,
			Path:     "settings.kubernetes.cluster-dns-ip",
			Line:     r.lines["settings.kubernetes"],
			Message:  "not set: Bottlerocket asks the EKS API for the service CIDR to find it, and berth does not; set it, or spec.cluster.cidr in a NodeConfig part",
		})
	}
	if r.proxyGiven {
		// As Bottlerocket's proxy-env template: the user's entries, then
		// localhost, the API server's host and the cluster's domain.
		noProxy := append(slices.Clone(r.noProxy), "localhost", "127.0.0.1")
		if h := urlHost(s.Cluster.APIServerEndpoint); h != "" {
			noProxy = append(noProxy, h)
		}
		domain := r.clusterDomain
		if domain == "" {
			domain = "cluster.local" // Bottlerocket's default
		}
		noProxy = append(noProxy, "."+domain)
		env := map[string]string{
			"NO_PROXY": strings.Join(noProxy, ","),
			"no_proxy": strings.Join(noProxy, ","),
		}
		if r.httpsProxy != "" {
			env["HTTPS_PROXY"], env["https_proxy"] = r.httpsProxy, r.httpsProxy
		}
		s.Instance.Environment = env
	}

	ps := r.problems
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Path, b.Path))
	})
	if len(ps) > MaxProblems {
		rest := ps[MaxProblems:]
		sev := SeverityWarning
		if slices.ContainsFunc(rest, func(p Problem) bool { return p.Severity == SeverityError }) {
			sev = SeverityError
		}
		ps = append(ps[:MaxProblems:MaxProblems], Problem{
			Severity: sev,
			Path:     "settings",
			Message:  fmt.Sprintf("... and %d more problems (bottlerocket.MaxProblems)", len(rest)),
		})
	}
	s.Problems = ps
}

// Value readers. Each reports a problem naming path when v is not what
// the setting takes, and returns the zero value.

// str reads a string that berth will use: no control characters, and
// check's rule when check is not nil.
func (r *reader) str(path string, v any, check func(string) error) (string, bool) {
	s, ok := v.(string)
	if !ok {
		r.errorf(path, "want a string, got %s", describe(v))
		return "", false
	}
	if err := noControl(s); err != nil {
		r.errorf(path, "%v", err)
		return "", false
	}
	if check != nil {
		if err := check(s); err != nil {
			r.errorf(path, "%v", err)
			return "", false
		}
	}
	return s, true
}

// secret is str for a value never to be quoted back.
func (r *reader) secret(path string, v any, check func(string) error) (string, bool) {
	s, ok := v.(string)
	if !ok {
		r.errorf(path, "want a string, got %s", kind(v))
		return "", false
	}
	if err := check(s); err != nil {
		r.errorf(path, "%v", err)
		return "", false
	}
	return s, true
}

// strings reads a list of strings, each checked as str does; nil and
// false when any is bad.
func (r *reader) strings(path string, v any, check func(string) error) ([]string, bool) {
	l, ok := v.([]any)
	if !ok {
		r.errorf(path, "want a list of strings, got %s", describe(v))
		return nil, false
	}
	out, bad := make([]string, 0, len(l)), false
	for i, e := range l {
		s, ok := r.str(indexed(path, i), e, check)
		bad = bad || !ok
		out = append(out, s)
	}
	if bad {
		return nil, false
	}
	return out, true
}

// list is strings for a setting whose value is used as a whole: nil when
// empty or bad.
func (r *reader) list(path string, v any, check func(string) error) []string {
	out, _ := r.strings(path, v, check)
	if len(out) == 0 {
		return nil
	}
	return out
}

// oneOrMore reads a string or a list of strings (cluster-dns-ip).
func (r *reader) oneOrMore(path string, v any, check func(string) error) []string {
	if _, ok := v.(string); ok {
		if s, ok := r.str(path, v, check); ok {
			return []string{s}
		}
		return nil
	}
	if _, ok := v.([]any); !ok {
		r.errorf(path, "want a string or a list of strings, got %s", describe(v))
		return nil
	}
	return r.list(path, v, check)
}

// stringMap reads a table of strings, checking keys and values; nil when
// it is empty or any entry is bad.
func (r *reader) stringMap(path string, v any, keyCheck, valueCheck func(string) error) map[string]string {
	t, ok := r.table(path, v)
	if !ok {
		return nil
	}
	out, bad := make(map[string]string, len(t)), false
	for _, k := range sortedKeys(t) {
		kp := join(path, k)
		if keyCheck != nil {
			if err := keyCheck(k); err != nil {
				r.errorf(kp, "%v", err)
				bad = true
				continue
			}
		}
		s, ok := r.str(kp, t[k], valueCheck)
		if !ok {
			bad = true
			continue
		}
		out[k] = s
	}
	if bad || len(out) == 0 {
		return nil
	}
	return out
}

func (r *reader) table(path string, v any) (map[string]any, bool) {
	t, ok := v.(map[string]any)
	if !ok {
		r.errorf(path, "want a table, got %s", describe(v))
	}
	return t, ok
}

func (r *reader) integer(path string, v any, lo, hi int64) (int64, bool) {
	n, ok := v.(int64)
	if !ok {
		r.errorf(path, "want an integer, got %s", describe(v))
		return 0, false
	}
	if n < lo || n > hi {
		r.errorf(path, "want an integer from %d to %d, got %d", lo, hi, n)
		return 0, false
	}
	return n, true
}

// int32 reads an integer from lo to kubelet's int32 maximum.
func (r *reader) int32(path string, v any, lo int64) *int32 {
	n, ok := r.integer(path, v, lo, 1<<31-1)
	if !ok {
		return nil
	}
	i := int32(n)
	return &i
}

// percent reads an image GC threshold: 0 to 100, as a number or, as
// Bottlerocket before 1.14 wanted it, a string.
func (r *reader) percent(path string, v any) *int32 {
	if s, ok := v.(string); ok {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			r.errorf(path, "want an integer from 0 to 100, got %s", quoteClipped(s))
			return nil
		}
		v = n
	}
	n, ok := r.integer(path, v, 0, 100)
	if !ok {
		return nil
	}
	i := int32(n)
	return &i
}

func (r *reader) boolean(path string, v any) (bool, bool) {
	b, ok := v.(bool)
	if !ok {
		r.errorf(path, "want true or false, got %s", describe(v))
	}
	return b, ok
}

func (r *reader) boolPtr(path string, v any) *bool {
	b, ok := r.boolean(path, v)
	if !ok {
		return nil
	}
	return &b
}

// optBool reads a boolean that may be absent (v nil): false then.
func (r *reader) optBool(path string, v any) (bool, bool) {
	if v == nil {
		return false, true
	}
	return r.boolean(path, v)
}

// describe says what v is, for "want X, got Y": a string or number
// quoted back (clipped), any other value by its kind.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		return quoteClipped(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		// 58.0, not 58: "want an integer, got 58" would puzzle.
		f := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(f, ".eIN") {
			f += ".0"
		}
		return f
	case bool:
		return strconv.FormatBool(v)
	}
	return kind(v)
}

// kind says what kind of TOML value v is, without its value.
func kind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []any:
		return "a list"
	case nil:
		return "nothing"
	}
	return "a date or time"
}

// sortedKeys returns m's keys in order, so that problems and flags come
// out the same for the same document.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// Bounds on the text of problems: keys and values quoted back may be
// long.
const (
	maxQuoted  = 64
	maxPath    = 256
	maxMessage = 1024
)

// clip bounds s, on a rune boundary.
func clip(s string) string {
	if len(s) <= maxQuoted*4 {
		return s
	}
	return strings.ToValidUTF8(s[:maxQuoted*4], "") + "..."
}

// quoteClipped quotes s (escaping control characters), at most maxQuoted
// bytes of it.
func quoteClipped(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(strings.ToValidUTF8(s[:maxQuoted], "")) + "..."
	}
	return strconv.Quote(s)
}

func clipPath(p string) string {
	if len(p) > maxPath {
		return strings.ToValidUTF8(p[:maxPath], "") + "..."
	}
	return p
}

func clipMessage(m string) string {
	if len(m) > maxMessage {
		return strings.ToValidUTF8(m[:maxMessage], "") + "..."
	}
	return m
}

// printable replaces control characters and invalid UTF-8 in s, for
// messages that quote the parser's.
func printable(s string) string {
	return strings.Map(func(c rune) rune {
		if isControl(c) || c == utf8.RuneError {
			return '?'
		}
		return c
	}, s)
}
