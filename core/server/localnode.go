package server

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/pki"
	"k8s.io/client-go/rest"
)

// kubeletClientName is the user the API server presents to kubelets (pods/log).
const kubeletClientName = "wasmplane-apiserver-kubelet-client"

// kubeletClientTLS is how the API server reaches kubelets: with its kubelet-client
// certificate. Kubelets of other machines (`wasmplane agent`) serve self-signed
// certificates, so the serving certificate is not verified — as kube-apiserver without
// --kubelet-certificate-authority.
func (s *security) kubeletClientTLS() (*tls.Config, error) {
	p, err := s.ca.Ensure("apiserver-kubelet-client", pki.Leaf{CommonName: kubeletClientName, Organizations: []string{authn.GroupMasters}, Usage: pki.ClientAuth})
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("kubelet client certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, nil //nolint:gosec // see above
}

// localNode is the NodeConfig of the node `up` runs in its own process: a node
// certificate (system:node:NAME in system:nodes, so the node authorizer applies), a
// serving certificate signed by the cluster CA, and kubelet clients limited to that CA.
func (s *security) localNode(cfg *Config, url string) (NodeConfig, error) {
	name := cfg.NodeName
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return NodeConfig{}, fmt.Errorf("node name: %w", err)
		}
		name = h
	}
	client, err := s.ca.Ensure("kubelet-client", pki.Leaf{CommonName: authn.NodeUserPrefix + name, Organizations: []string{authn.GroupNodes}, Usage: pki.ClientAuth})
	if err != nil {
		return NodeConfig{}, err
	}
	serving, err := s.ca.Ensure("kubelet-serving", pki.Leaf{CommonName: name, DNSNames: dedupe([]string{name, "localhost"}),
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usage: pki.ServerAuth})
	if err != nil {
		return NodeConfig{}, err
	}
	port := cfg.KubeletPort
	return NodeConfig{
		RESTConfig: &rest.Config{Host: url, TLSClientConfig: rest.TLSClientConfig{CAData: s.ca.CertPEM, CertData: client.CertPEM, KeyData: client.KeyPEM}},
		NodeName:   name, RootDir: filepath.Join(cfg.DataDir, "node"), RuntimeEndpoint: cfg.ContainerRuntimeEndpoint, Port: port,
		KubeletTLS: KubeletTLS{CertFile: serving.CertFile, KeyFile: serving.KeyFile, ClientCAFile: s.ca.CertFile},
	}, nil
}
