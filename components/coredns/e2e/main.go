// Command e2e is the CoreDNS the e2e suite's agnhost image carries as
// /coredns: the cluster's plugin set (../main.go) and hosts, which the
// suite's own Corefile for it names (test/e2e/network/dns_common.go,
// generateCoreDNSConfigmap: `hosts { IP NAME }` and `log`). Upstream's
// agnhost holds a CoreDNS 1.6.2 release with every plugin; this is the
// cluster's CoreDNS version, so a Corefile naming a plugin outside this
// list fails at start with "unknown directive" rather than serving less.
package main

import (
	"fmt"
	"os"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives are the compiled-in plugins in CoreDNS's own execution order
// (core/dnsserver/zdirectives.go).
var directives = []string{
	"reload", "ready", "health", "prometheus", "errors", "log",
	"loadbalance", "cache", "hosts", "kubernetes", "loop", "forward",
}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		fmt.Fprintln(os.Stderr, "coredns: setting the plugin directives:", err)
		os.Exit(1)
	}
	coremain.Run()
}
