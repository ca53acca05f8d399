package main

import (
	"context"

	"github.com/berth-node/berth/init/devlinks"
)

// startDevLinks starts the loop that keeps /dev/disk/by-id and the EC2
// block-device names (/dev/xvdba) for NVMe devices, as udev does on EKS's
// AMIs: the EBS CSI driver finds volumes by those names. It runs for as
// long as PID 1 does; the report's devlinks section shows the links made
// at start and the counts since, and is current each time boot.json is
// written. Its failures are logged and reported; boot goes on without
// links.
func (b *boot) startDevLinks(ctx context.Context) {
	st := &devlinks.Status{}
	b.repMu.Lock()
	b.rep.DevLinks = st
	b.repMu.Unlock()
	log := b.log.With("phase", "devlinks")
	b.goSafe(log, "devlinks", func() {
		err := devlinks.Run(ctx, log, devlinks.Options{SysFS: "/sys", DevDir: "/dev"}, st)
		if err != nil {
			log.Warn("no device links for NVMe devices added after boot", "err", err)
		}
	})
}
