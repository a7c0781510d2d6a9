package activities

import (
	"encoding/json"
	"testing"

	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/store/storetest"
	"github.com/intendhq/intend/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newTestEnv: see storetest.Env.
func newTestEnv(t *testing.T, settings map[string]json.RawMessage) (*store.Store, store.Environment) {
	t.Helper()
	return storetest.Env(t, settings)
}
