package precompile

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/wasmplane/wasmplane/plugins/wasm"
)

// TestPrecompile compiles the files listed (separated by the OS path list separator) in
// WASMTEST_PRECOMPILE_FILES into the cache directory WASMTEST_PRECOMPILE_CACHE.
func TestPrecompile(t *testing.T) {
	dir, files := os.Getenv("WASMTEST_PRECOMPILE_CACHE"), os.Getenv("WASMTEST_PRECOMPILE_FILES")
	if dir == "" || files == "" {
		t.Skip("run by wasmtest")
	}
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close(ctx)
	// Must match plugins/wasm.NewRuntime: the cache key covers the module's bytes, which
	// the host instruments, and wazero's own termination checks, which it leaves off.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCompilationCache(cache).WithCloseOnContextDone(false))
	defer rt.Close(ctx)
	var wg sync.WaitGroup
	for _, f := range strings.Split(files, string(os.PathListSeparator)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := os.ReadFile(f)
			if err == nil {
				b, err = wasm.Instrument(b)
			}
			if err == nil {
				_, err = rt.CompileModule(ctx, b)
			}
			if err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}()
	}
	wg.Wait()
}
