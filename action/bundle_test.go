package action

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCacheBundleIsCurrent rebuilds action/cache.js (and its licence
// notices) from action/cache/ and fails when the committed files differ:
// the Action runs the committed bundle, so a change to its source or its
// pinned packages that was not followed by `make action-cache` would ship
// old code.
func TestCacheBundleIsCurrent(t *testing.T) {
	if _, err := os.Stat("cache/node_modules/esbuild"); err != nil {
		if os.Getenv("HWK_REQUIRE_ACTION_CACHE") != "" {
			t.Fatal("action/cache/node_modules is not installed: npm ci --prefix action/cache (make action-cache does it)")
		}
		t.Skip("action/cache/node_modules is not installed (npm ci --prefix action/cache); not checking action/cache.js")
	}
	if _, err := exec.LookPath("node"); err != nil {
		// node_modules comes with the source tree, Node.js with the host:
		// the Windows test binaries under Wine see the first, not the second.
		if os.Getenv("HWK_REQUIRE_ACTION_CACHE") != "" || os.Getenv("HWK_REQUIRE_NODE") == "1" {
			t.Fatal("there is no node to run action/cache/build.mjs (Debian: nodejs)")
		}
		t.Skip("node is not on PATH; not checking action/cache.js")
	}
	out := filepath.Join(t.TempDir(), "cache.js")
	if b, err := exec.Command("node", "cache/build.mjs", out).CombinedOutput(); err != nil {
		t.Fatalf("node cache/build.mjs: %v\n%s", err, b)
	}
	for _, f := range []string{"cache.js", "cache.js.licenses.txt"} {
		want, err := os.ReadFile(filepath.Join(filepath.Dir(out), f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("action/%s is not what action/cache/build.mjs makes from action/cache/: run make action-cache and commit the result", f)
		}
	}
}
