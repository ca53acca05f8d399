// Command imdsserver runs the IMDSv2 stand-in on a local port, for demos and
// for QEMU tests driven from a shell: a guest on user-mode networking reaches
// the host's loopback at 10.0.2.2, so boot the guest with
// berth.imds=http://10.0.2.2:PORT. The first line on stdout is
// "imdsserver: listening on URL", for scripts that asked for port 0.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "imdsserver:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	def := imdsserver.DefaultInstance()
	fs := flag.NewFlagSet("imdsserver", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on; port 0 picks a free one")
	userData := fs.String("user-data", "", "file served as /latest/user-data (default: none, 404)")
	optional := fs.Bool("tokens-optional", false, "allow IMDSv1 GETs without a token (EC2's http-tokens=optional)")
	verbose := fs.Bool("v", false, "log every request to stderr")
	in := def
	fs.StringVar(&in.InstanceID, "instance-id", def.InstanceID, "instance ID")
	fs.StringVar(&in.InstanceType, "instance-type", def.InstanceType, "instance type")
	fs.StringVar(&in.AccountID, "account-id", def.AccountID, "account ID in the identity document")
	fs.StringVar(&in.ImageID, "ami-id", def.ImageID, "AMI ID")
	fs.StringVar(&in.Region, "region", def.Region, "region")
	fs.StringVar(&in.AvailabilityZone, "az", "", "availability zone (default: the region + \"a\")")
	fs.StringVar(&in.LocalIPv4, "local-ipv4", def.LocalIPv4, "private IPv4 address; empty for an IPv6-only instance")
	fs.StringVar(&in.LocalHostname, "local-hostname", "", "private DNS name (default: derived from -local-ipv4 and -region)")
	fs.StringVar(&in.MAC, "mac", def.MAC, "primary interface MAC")
	ipv6s := fs.String("ipv6s", "", "comma-separated IPv6 addresses of the primary interface")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if in.AvailabilityZone == "" {
		in.AvailabilityZone = in.Region + "a"
	}
	if in.AvailabilityZoneID == def.AvailabilityZoneID && in.Region != def.Region {
		in.AvailabilityZoneID = ""
	}
	if in.LocalHostname == "" {
		in.LocalHostname = privateDNSName(in.LocalIPv4, in.Region)
	}
	if *ipv6s != "" {
		in.IPv6s = strings.Split(*ipv6s, ",")
	}
	cfg := imdsserver.Config{Instance: in, TokensOptional: *optional}
	if *userData != "" {
		b, err := os.ReadFile(*userData)
		if err != nil {
			return fmt.Errorf("reading -user-data: %w", err)
		}
		cfg.UserData = b
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := imdsserver.New(cfg)
	if err != nil {
		return err
	}
	url, stop, err := s.Start(*listen)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("imdsserver: listening on %s\n", url)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}

// privateDNSName is EC2's IP-based private DNS name: us-east-1 has its own
// domain.
func privateDNSName(ipv4, region string) string {
	if ipv4 == "" {
		return ""
	}
	domain := region + ".compute.internal"
	if region == "us-east-1" {
		domain = "ec2.internal"
	}
	return "ip-" + strings.ReplaceAll(ipv4, ".", "-") + "." + domain
}
