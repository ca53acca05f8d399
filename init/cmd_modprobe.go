package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/berth-node/berth/bootlog"
	"github.com/berth-node/berth/kmod"
	"golang.org/x/sys/unix"
)

// modprobePath is where the kernel runs modprobe from (its built-in
// default, /proc/sys/kernel/modprobe); the root image links it to berth.
const modprobePath = "/sbin/modprobe"

// cmdModprobe is what the kernel runs when it needs a module nobody loaded
// (request_module: `modprobe -q -- rtnl-link-veth` when CNI makes a veth
// pair, `crypto-crc32c`, `fs-xfs`, netfilter targets...). berth ships no
// kmod tools, so it answers from the same index the boot uses, resolving
// aliases and dependencies. Its lines go to the kernel log, the only place
// an operator sees a usermode helper's output.
func cmdModprobe(e env, args []string) int {
	quiet := false
	var names []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			names = append(names, args[i+1:]...)
			i = len(args)
		case a == "-q" || a == "--quiet":
			quiet = true
		case a == "-b" || a == "--use-blacklist" || a == "-s" || a == "--syslog":
			// Accepted for the kernel's and tools' sake; berth has no
			// blacklist, and its lines go to the kernel log anyway.
		case len(a) > 1 && a[0] == '-':
			fmt.Fprintf(e.stderr, "berth modprobe: unsupported option %s (berth implements: modprobe [-q] [--] NAME...)\n", a)
			return 2
		default:
			names = append(names, a)
		}
	}
	if len(names) == 0 {
		fmt.Fprintln(e.stderr, "usage: modprobe [-q] [--] NAME...")
		return 2
	}
	log := e.log
	if kmsg, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err == nil {
		defer kmsg.Close()
		out := bootlog.NewOutput()
		out.Attach(nil, kmsg)
		log = slog.New(bootlog.New(out, bootlog.Options{})).With("phase", "modprobe")
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		fmt.Fprintf(e.stderr, "berth modprobe: uname: %v\n", err)
		return 1
	}
	dir := filepath.Join("/lib/modules", unix.ByteSliceToString(uts.Release[:]))
	ix, err := kmod.LoadIndex(dir)
	if err != nil {
		log.Error("cannot load module index", "dir", dir, "err", err)
		return 1
	}
	loaded, err := kmod.Load(e.ctx, log, ix, names...)
	if len(loaded) > 0 {
		log.Info("loaded on the kernel's request", "modules", loaded, "for", names)
	}
	if err != nil {
		if !quiet {
			fmt.Fprintf(e.stderr, "berth modprobe: %v\n", err)
		}
		log.Warn("kernel's module request failed", "for", names, "err", err)
		return 1
	}
	return 0
}
