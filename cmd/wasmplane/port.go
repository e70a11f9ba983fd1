package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// portFile keeps the API server port `up --port 0` picked, in the data dir: a restart
// with --port 0 serves on it again, so the kubeconfigs and running clients that point at
// it keep working.
func portFile(dataDir string) string { return filepath.Join(dataDir, "port") }

// rememberedPort is the port an earlier `up --port 0` on dataDir picked, or 0.
func rememberedPort(dataDir string) int {
	b, err := os.ReadFile(portFile(dataDir))
	if err != nil {
		return 0
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || p <= 0 || p > 65535 {
		return 0
	}
	return p
}

// rememberPort writes the port of the server at serverURL into dataDir.
func rememberPort(dataDir, serverURL string) error {
	u, err := url.Parse(serverURL)
	if err != nil {
		return fmt.Errorf("remembering the port: %w", err)
	}
	if err := os.WriteFile(portFile(dataDir), []byte(u.Port()+"\n"), 0o644); err != nil {
		return fmt.Errorf("remembering the port: %w", err)
	}
	return nil
}

// kubeletPort maps the --kubelet-port flag onto the server's setting: 0 picks a free port
// as --port 0 does (-1, which meant that before, still does).
func kubeletPort(flag int) int {
	if flag <= 0 {
		return -1
	}
	return flag
}

// addrInUse tells whether err is a listener's "address already in use".
func addrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }
