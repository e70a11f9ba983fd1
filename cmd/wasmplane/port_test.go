package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestKubeletPortFlag(t *testing.T) {
	tests := []struct {
		flag, want int
	}{
		{0, -1},  // a free port, as --port 0
		{-1, -1}, // what meant a free port before, still does
		{10250, 10250},
		{12345, 12345},
	}
	for _, tc := range tests {
		if got := kubeletPort(tc.flag); got != tc.want {
			t.Errorf("kubeletPort(%d) = %d, want %d (the server's free-port setting is -1)", tc.flag, got, tc.want)
		}
	}
}

func TestRememberedPort(t *testing.T) {
	tests := []struct {
		name    string
		content string // "" = no file
		want    int
	}{
		{"none yet", "", 0},
		{"kept", "38211\n", 38211},
		{"garbage", "x\n", 0},
		{"out of range", "70000\n", 0},
		{"zero", "0\n", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.content != "" {
				if err := os.WriteFile(filepath.Join(dir, "port"), []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := rememberedPort(dir); got != tc.want {
				t.Errorf("rememberedPort = %d, want %d", got, tc.want)
			}
		})
	}
	// What `up --port 0` writes is what the next `up --port 0` reads.
	dir := t.TempDir()
	if err := rememberPort(dir, "https://127.0.0.1:41234"); err != nil {
		t.Fatal(err)
	}
	if got := rememberedPort(dir); got != 41234 {
		t.Errorf("after rememberPort: %d, want 41234", got)
	}
}

// TestAddrInUse: a taken remembered port is told apart from other start failures
// through the server's wrapped errors, so `up` picks another port instead of failing.
func TestAddrInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(taken.Addr().(*net.TCPAddr).Port))
	if err == nil {
		t.Fatal("listening twice on one port succeeded")
	}
	wrapped := fmt.Errorf("starting the API server: %w", fmt.Errorf("listening: %w", err))
	if !addrInUse(wrapped) {
		t.Errorf("addrInUse(%v) = false", wrapped)
	}
	if addrInUse(fmt.Errorf("starting the embedded etcd: %w", os.ErrPermission)) {
		t.Error("addrInUse of a permission error = true")
	}
}
