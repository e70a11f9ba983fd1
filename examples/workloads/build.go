package workloads

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Names lists the example programs in this directory.
var Names = []string{"hello", "counter", "crash", "init-setup", "sleeper", "toolbox"}

// Build compiles every example with GOOS=wasip1 GOARCH=wasm into outDir and returns the
// path of each module by name. It shells out to the `go` command that runs the caller.
func Build(ctx context.Context, outDir string) (map[string]string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, fmt.Errorf("workloads: cannot locate sources")
	}
	srcDir := filepath.Dir(file)
	args := []string{"build", "-o", outDir + string(filepath.Separator)}
	for _, n := range Names {
		args = append(args, "./"+n)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("workloads: go build: %w\n%s", err, out)
	}
	paths := map[string]string{}
	for _, n := range Names {
		p := filepath.Join(outDir, n)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("workloads: built module %s: %w", n, err)
		}
		paths[n] = p
	}
	return paths, nil
}
