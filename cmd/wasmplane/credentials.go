package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/pki"
	"github.com/wasmplane/wasmplane/core/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// adminConfig loads the admin kubeconfig of a data dir.
func adminConfig(dataDir string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "admin.kubeconfig"))
	if err != nil {
		return nil, fmt.Errorf("loading the admin kubeconfig (is --data-dir right, and has `wasmplane up` run?): %w", err)
	}
	return cfg, nil
}

// newKubeconfigCmd issues a client-certificate kubeconfig for a user: how an admin
// onboards a tenant. Only someone who can read the CA key (the admin) can run it.
func newKubeconfigCmd() *cobra.Command {
	var dataDir, user, out string
	var groups []string
	var validity time.Duration
	cmd := &cobra.Command{
		Use:   "kubeconfig --user NAME [--group G]...",
		Short: "Issue a kubeconfig with a client certificate for a user (admin only)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if user == "" {
				return fmt.Errorf("--user is required")
			}
			ca, err := pki.LoadOrCreateCA(filepath.Join(dataDir, "pki"))
			if err != nil {
				return err
			}
			admin, err := adminConfig(dataDir)
			if err != nil {
				return err
			}
			certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: user, Organizations: groups, Usage: pki.ClientAuth, Validity: validity})
			if err != nil {
				return err
			}
			rc := &rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM, CertData: certPEM, KeyData: keyPEM}}
			data, err := server.Kubeconfig(rc, user)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if err := os.WriteFile(out, data, 0o600); err != nil {
				return fmt.Errorf("writing %s: %w", out, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s for user %q (groups %v)\n", out, user, groups)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", ".wasmplane", "the data dir of wasmplane up (holds the CA)")
	f.StringVar(&user, "user", "", "user name (the certificate's common name)")
	f.StringSliceVar(&groups, "group", nil, "groups (the certificate's organizations); repeatable")
	f.StringVarP(&out, "output", "o", "", "file to write (default stdout)")
	f.DurationVar(&validity, "validity", 365*24*time.Hour, "how long the certificate is valid")
	return cmd
}

// newToken is `wasmplane token create`: a bootstrap token for joining nodes.
func newToken() *cobra.Command {
	root := &cobra.Command{Use: "token", Short: "Manage bootstrap tokens for joining nodes"}
	var dataDir, description string
	var ttl time.Duration
	var groups []string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a bootstrap token (printed as <id>.<secret>)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := adminConfig(dataDir)
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			for _, g := range groups {
				if !strings.HasPrefix(g, authn.GroupBootstrappers+":") {
					return fmt.Errorf("--groups: %q must start with %q", g, authn.GroupBootstrappers+":")
				}
			}
			id, secret := randomToken(6), randomToken(16)
			data := map[string]string{
				authn.BootstrapTokenID: id, authn.BootstrapTokenSecret: secret,
				authn.BootstrapUsageAuth: "true", authn.BootstrapUsageSigning: "true",
				authn.BootstrapDescription: description,
			}
			if ttl > 0 {
				data[authn.BootstrapExpiration] = time.Now().Add(ttl).UTC().Format(time.RFC3339)
			}
			if len(groups) > 0 {
				data[authn.BootstrapExtraGroups] = strings.Join(groups, ",")
			}
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: authn.BootstrapSecretPrefix + id, Namespace: "kube-system"},
				Type: authn.BootstrapSecretType, Data: map[string][]byte{}}
			for k, v := range data {
				s.Data[k] = []byte(v)
			}
			if _, err := cs.CoreV1().Secrets("kube-system").Create(cmd.Context(), s, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating the bootstrap token secret: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s.%s\n", id, secret)
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&dataDir, "data-dir", ".wasmplane", "the data dir of wasmplane up (holds the admin kubeconfig)")
	f.DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token is valid (0 = forever)")
	f.StringSliceVar(&groups, "groups", nil, "extra groups (system:bootstrappers:…)")
	f.StringVar(&description, "description", "", "a human-readable description")
	root.AddCommand(create)
	return root
}

// randomToken returns n characters of [a-z0-9], as bootstrap tokens use.
func randomToken(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
