package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/berth-node/berth/config/nocloud"
	"github.com/berth-node/berth/network"
)

// phaseNetwork brings up the primary interface (DHCP by default) so that
// IMDS and the API server can be reached. Not fatal by itself: the config
// phase says what could not be reached, and an appliance may run without.
// A bad berth.* network key is logged and ignored while the rest of the
// command line still applies, so a typo does not cost the node its
// network; the keys ignored become the phase's (non-fatal) error, for the
// boot report.
//
// A NoCloud seed's network-config (read by the source phase) takes the
// place of the default DHCP, as DHCP's answer would configure the link,
// unless the command line sets the network itself (nocloud.NetworkOver).
func phaseNetwork(ctx context.Context, b *boot, log *slog.Logger) error {
	cfg, problems := network.ParseConfig(b.cl.Get)
	for _, p := range problems {
		log.Warn("kernel command line key ignored", "key", p.Key, "value", p.Value, "err", p.Err)
	}
	if seed := b.node.seed; seed != nil && seed.Network != nil {
		var keys []string
		cfg, keys = nocloud.NetworkOver(cfg, seed.Network, b.cl.Has)
		if len(keys) > 0 {
			log.Warn("the NoCloud seed's network-config is not applied: the kernel command line sets the network", "keys", keys)
		} else {
			log.Info("network from the NoCloud seed's network-config", "mode", cfg.Mode, "interface", cfg.Interface)
		}
	}
	res, h, err := network.Up(ctx, log, cfg)
	b.node.net, b.node.netH = res, h
	if res != nil {
		b.rep.Network = res
	}
	return errors.Join(problems.Err(), err)
}
