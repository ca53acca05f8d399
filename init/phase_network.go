package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/berth-node/berth/network"
)

// phaseNetwork brings up the primary interface (DHCP by default) so that
// IMDS and the API server can be reached. Not fatal by itself: the config
// phase says what could not be reached, and an appliance may run without.
func phaseNetwork(ctx context.Context, b *boot, log *slog.Logger) error {
	cfg, err := network.ParseConfig(b.cl.Get)
	if err != nil {
		return fmt.Errorf("kernel command line: %w", err)
	}
	res, h, err := network.Up(ctx, log, cfg)
	b.node.net, b.node.netH = res, h
	if res != nil {
		b.rep.Network = res
	}
	return err
}
