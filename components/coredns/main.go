// Command coredns is CoreDNS with only the plugins EKS's Corefile uses
// compiled in (CoreDNS's plugin list is fixed at compile time, and its
// default build links every plugin, cloud SDKs included). The cluster's
// coredns image runs it with -conf /etc/coredns/Corefile.
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
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives are the compiled-in plugins in CoreDNS's own execution order
// (core/dnsserver/zdirectives.go); a Corefile naming any other plugin fails
// at start with "unknown directive" rather than a missing action.
var directives = []string{
	"reload", "ready", "health", "prometheus", "errors", "log",
	"loadbalance", "cache", "kubernetes", "loop", "forward",
}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		fmt.Fprintln(os.Stderr, "coredns: setting the plugin directives:", err)
		os.Exit(1)
	}
	coremain.Run()
}
