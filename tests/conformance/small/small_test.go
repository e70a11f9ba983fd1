//go:build e2esmall

// Package small is a short build of Kubernetes' e2e suite for CI: the same framework and the
// same specs as e2e.test, but only from the spec packages whose imports stay close to what
// wasmplane's own tests already compile (common/storage and instrumentation), so that it
// builds in a few minutes instead of the whole suite's seventeen. tests/conformance/build.sh
// --small builds it in a temporary module (the harness's e2e.go.mod with the versions
// aligned to wasmplane's go.mod); the build tag keeps it out of wasmplane's own module.
package small

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"

	// Before the spec packages: see its comment.
	_ "conformancee2e/small/gates"

	// The spec packages of the short suite.
	_ "k8s.io/kubernetes/test/e2e/common/storage"
	_ "k8s.io/kubernetes/test/e2e/instrumentation"
)

// The whole suite's set-up also waits for schedulable nodes and kube-system pods; the specs
// here need neither, so the set-up only checks that the server answers.
var _ = ginkgo.SynchronizedBeforeSuite(func(ctx context.Context) []byte {
	c, err := framework.LoadClientset()
	framework.ExpectNoError(err, "loading the client")
	v, err := c.Discovery().ServerVersion()
	framework.ExpectNoError(err, "reading the server's version")
	framework.Logf("server version: %s", v.GitVersion)
	return nil
}, func(context.Context, []byte) {})

func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown arguments: %v\n", flag.Args())
		os.Exit(2)
	}
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestE2E(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "Kubernetes e2e suite", suiteConfig, reporterConfig)
}
