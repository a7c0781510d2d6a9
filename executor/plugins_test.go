package executor

import (
	"log/slog"
	"testing"
)

// An executor that cannot make its plugin cache directory (a system
// user whose home is /, as the server's embedded executors of
// --executor-uids are) still starts: the directory is made when a plugin
// first runs, not when the executor starts (review of issue 30: every
// embedded executor of a root server failed to start on it).
func TestPluginCacheMadeOnFirstUse(t *testing.T) {
	h, err := newPluginHost(PluginsConfig{CacheDir: "/proc/intend-no-such-dir/plugins"}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("newPluginHost with a cache directory it cannot make: %v; want it to start", err)
	}
	_ = h.Close()
}
