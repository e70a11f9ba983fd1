package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/wasmplane/wasmplane/core/controlplane/authtrust"
	"github.com/wasmplane/wasmplane/core/controlplane/kubernetesservice"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// startKubernetesService keeps the `default/kubernetes` Service and lists this server in
// its endpoints until ctx ends; the returned func stops it (taking this server out of the
// endpoints) and waits.
func startKubernetesService(ctx context.Context, cfg *rest.Config, clusterIP, publicIP netip.Addr, port int32, log *slog.Logger) (func(), error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "wasmplane-apiserver/kubernetes-service"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes Service client: %w", err)
	}
	r := kubernetesservice.New(kubernetesservice.Config{Client: client, ClusterIP: clusterIP, PublicIP: publicIP, Port: port, Logger: log})
	// The first pass runs before the server reports ready, so that clients (Kubernetes'
	// e2e framework) find the Service at once.
	if err := r.Reconcile(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}, nil
}

// advertiseAddress is the address listed in the `kubernetes` endpoints: the configured
// one, else the bound one, else (bound to every address) the host's first non-loopback
// address, as kube-apiserver picks its --advertise-address.
func advertiseAddress(configured netip.Addr, bound *net.TCPAddr) netip.Addr {
	if configured.IsValid() {
		return configured
	}
	if ip, ok := netip.AddrFromSlice(bound.IP); ok && !ip.Unmap().IsUnspecified() {
		return ip.Unmap()
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
					return ip.Unmap()
				}
			}
		}
	}
	return netip.MustParseAddr("127.0.0.1")
}

// startAuthenticationTrust writes kube-system/extension-apiserver-authentication before
// the server reports ready (an aggregated server reads it when it starts) and keeps it
// until ctx ends; the returned func stops it and waits.
func startAuthenticationTrust(ctx context.Context, cfg *rest.Config, sec *security, log *slog.Logger) (func(), error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "wasmplane-apiserver/authentication-trust"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("authentication trust client: %w", err)
	}
	tc := authtrust.Config{Client: client, ClientCA: sec.ca.CertPEM, RequestHeaderCA: sec.frontProxyCA.CertPEM,
		RequestHeaderAllowedNames: []string{frontProxyClientName}, Logger: log}
	if err := authtrust.Reconcile(ctx, tc); err != nil {
		return nil, fmt.Errorf("writing %s/%s: %w", authtrust.Namespace, authtrust.Name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		authtrust.Run(ctx, tc)
	}()
	return func() {
		cancel()
		<-done
	}, nil
}
