// Package authtrust keeps kube-system/extension-apiserver-authentication, the ConfigMap
// from which aggregated API servers (and webhooks built on k8s.io/apiserver) learn which
// client certificates to trust: the cluster's client CA, and the front-proxy CA with the
// header names the aggregation layer sends the user in. kube-apiserver keeps it with its
// ClusterAuthenticationTrustController; API servers of one cluster add their CAs to it.
package authtrust

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/retry"
)

// Namespace and Name locate the ConfigMap, as Kubernetes names it.
const (
	Namespace = metav1.NamespaceSystem
	Name      = "extension-apiserver-authentication"
)

// Config is what the ConfigMap says.
type Config struct {
	// Client is the loopback client that writes it.
	Client kubernetes.Interface
	// ClientCA is the PEM of the CA that signs users' client certificates.
	ClientCA []byte
	// RequestHeaderCA is the PEM of the front-proxy CA, RequestHeaderAllowedNames the
	// common names of the certificates allowed to send the headers.
	RequestHeaderCA           []byte
	RequestHeaderAllowedNames []string
	// Interval is how often Run puts it right again (default one minute).
	Interval time.Duration
	// Logger logs failures.
	Logger *slog.Logger
}

// Reconcile writes the ConfigMap, adding this server's CAs to those already listed
// (another API server of the cluster may have its own) and the header settings.
func Reconcile(ctx context.Context, cfg Config) error {
	cms := cfg.Client.CoreV1().ConfigMaps(Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cms.Get(ctx, Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name}}
			data, err := desired(nil, cfg)
			if err != nil {
				return err
			}
			cm.Data = data
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), Name, err)
			}
			return err
		}
		if err != nil {
			return fmt.Errorf("reading %s/%s: %w", Namespace, Name, err)
		}
		data, err := desired(cur.Data, cfg)
		if err != nil {
			return err
		}
		if maps.Equal(cur.Data, data) {
			return nil
		}
		cur = cur.DeepCopy()
		cur.Data = data
		_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// Run reconciles every Interval until ctx ends.
func Run(ctx context.Context, cfg Config) {
	interval := cfg.Interval
	if interval == 0 {
		interval = time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := Reconcile(ctx, cfg); err != nil && ctx.Err() == nil {
			log.Error("keeping the authentication trust ConfigMap", "namespace", Namespace, "name", Name, "err", err)
		}
	}
}

// desired is the ConfigMap's data given what it holds now.
func desired(cur map[string]string, cfg Config) (map[string]string, error) {
	out := maps.Clone(cur)
	if out == nil {
		out = map[string]string{}
	}
	clientCA, err := mergeBundles(cur["client-ca-file"], cfg.ClientCA)
	if err != nil {
		return nil, fmt.Errorf("client-ca-file: %w", err)
	}
	out["client-ca-file"] = clientCA
	if len(cfg.RequestHeaderCA) == 0 {
		return out, nil
	}
	rhCA, err := mergeBundles(cur["requestheader-client-ca-file"], cfg.RequestHeaderCA)
	if err != nil {
		return nil, fmt.Errorf("requestheader-client-ca-file: %w", err)
	}
	out["requestheader-client-ca-file"] = rhCA
	// The header names of Kubernetes' front proxy (kube-apiserver's --requestheader-*
	// flags as kubeadm sets them), which the aggregation layer sends.
	for key, list := range map[string][]string{
		"requestheader-username-headers":     {"X-Remote-User"},
		"requestheader-uid-headers":          {"X-Remote-Uid"},
		"requestheader-group-headers":        {"X-Remote-Group"},
		"requestheader-extra-headers-prefix": {"X-Remote-Extra-"},
		"requestheader-allowed-names":        cfg.RequestHeaderAllowedNames,
	} {
		if list == nil {
			list = []string{}
		}
		b, err := json.Marshal(list)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		out[key] = string(b)
	}
	return out, nil
}

// mergeBundles returns the PEM certificates of cur followed by those of add it lacks.
func mergeBundles(cur string, add []byte) (string, error) {
	var certs []*x509.Certificate
	seen := map[string]bool{}
	for _, bundle := range [][]byte{[]byte(cur), add} {
		if len(bytes.TrimSpace(bundle)) == 0 {
			continue
		}
		parsed, err := certutil.ParseCertsPEM(bundle)
		if err != nil {
			return "", fmt.Errorf("parsing certificates: %w", err)
		}
		for _, c := range parsed {
			if !seen[string(c.Raw)] {
				seen[string(c.Raw)] = true
				certs = append(certs, c)
			}
		}
	}
	pem, err := certutil.EncodeCertificates(certs...)
	if err != nil {
		return "", fmt.Errorf("encoding certificates: %w", err)
	}
	return string(pem), nil
}
