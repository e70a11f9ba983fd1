package main

import (
	"fmt"
	"net/netip"

	"github.com/wasmplane/wasmplane/core/apiserver/servicealloc"
	"github.com/wasmplane/wasmplane/core/server"
)

// parseServiceFlags reads --service-cluster-ip-range, --service-node-port-range and
// --advertise-address into cfg.
func parseServiceFlags(cidr, ports, advertise string, cfg *server.Config) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return fmt.Errorf("--service-cluster-ip-range %q: %w", cidr, err)
	}
	if p.Masked() != p {
		return fmt.Errorf("--service-cluster-ip-range %q: want the network address (%s)", cidr, p.Masked())
	}
	cfg.ServiceCIDR = p
	if cfg.NodePortRange, err = servicealloc.ParsePortRange(ports); err != nil {
		return fmt.Errorf("--service-node-port-range: %w", err)
	}
	if advertise != "" {
		if cfg.AdvertiseAddress, err = netip.ParseAddr(advertise); err != nil {
			return fmt.Errorf("--advertise-address %q: %w", advertise, err)
		}
	}
	return nil
}
