package imds

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Metadata reads everything a node needs from IMDS. It first reads the MAC
// alone, so an unreachable IMDS gives one error rather than one per item,
// then reads the rest concurrently: on a booting node these round trips are
// on the critical path.
func (c *Client) Metadata(ctx context.Context) (*Metadata, error) {
	m := &Metadata{}
	mac, err := c.Get(ctx, "meta-data/mac")
	if err != nil {
		return nil, err
	}
	m.MAC = strings.TrimSpace(string(mac))

	// item is one path to read, into a string (trimmed) or raw bytes.
	type item struct {
		path     string
		str      *string
		raw      *[]byte
		required bool
	}
	var ipv6s, doc []byte
	items := []item{
		{path: "meta-data/instance-id", str: &m.InstanceID, required: true},
		{path: "meta-data/instance-type", str: &m.InstanceType, required: true},
		{path: "meta-data/placement/availability-zone", str: &m.AvailabilityZone, required: true},
		// Region and the rest can be missing on some instances (an IPv6-only
		// one has no local-ipv4); the identity document fills what it can.
		{path: "meta-data/placement/region", str: &m.Region},
		{path: "meta-data/local-ipv4", str: &m.LocalIPv4},
		{path: "meta-data/local-hostname", str: &m.LocalHostname},
		{path: "dynamic/instance-identity/document", raw: &doc},
	}
	if m.MAC != "" && !strings.ContainsAny(m.MAC, "/?#") {
		items = append(items, item{path: "meta-data/network/interfaces/macs/" + m.MAC + "/ipv6s", raw: &ipv6s})
	}
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() {
			b, err := c.Get(ctx, it.path)
			switch {
			case errors.Is(err, ErrNotFound) && !it.required:
				return
			case err != nil:
				errs[i] = err
				return
			}
			if it.str != nil {
				*it.str = strings.TrimSpace(string(b))
			} else {
				*it.raw = b
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	if ipv6s != nil {
		v, err := ParseIPv6s(ipv6s)
		if err != nil {
			return nil, fmt.Errorf("imds: meta-data/network/interfaces/macs/%s/ipv6s: %w", m.MAC, err)
		}
		m.IPv6s = v
	}
	if doc != nil {
		d, err := ParseIdentityDocument(doc)
		if err != nil {
			return nil, fmt.Errorf("imds: dynamic/instance-identity/document: %w", err)
		}
		m.IdentityDocument = doc
		m.AccountID = d.AccountID
		fill(&m.Region, d.Region)
		fill(&m.LocalIPv4, d.PrivateIP)
		if d.InstanceID != "" && d.InstanceID != m.InstanceID {
			c.logger.Warn("imds identity document names another instance", "document", d.InstanceID,
				"meta-data/instance-id", m.InstanceID)
		}
	}
	if m.Region == "" {
		return nil, fmt.Errorf("imds: the region is unknown: meta-data/placement/region and the identity document's region are both missing")
	}
	return m, nil
}

func fill(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}
