package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/ledger"
)

// fakePlugins is a PluginHost that hands out one handler and remembers
// what it was asked for.
type fakePlugins struct {
	h     adapters.Handler
	err   error
	asked []string
}

func (f *fakePlugins) Handler(_ context.Context, env string, p ledger.Plugin, typ string) (adapters.Handler, error) {
	f.asked = append(f.asked, env+" "+p.Name+" "+typ)
	return f.h, f.err
}

// TestHandlerOfAPluginType: a type a plugin of the batch's version serves
// runs on that plugin, never on a built-in adapter of the same type; an
// executor without plugins refuses it, naming the plugin; a plugin that
// cannot run keeps its error's class; other types use the built-ins.
func TestHandlerOfAPluginType(t *testing.T) {
	builtin := &thing{state: map[string]string{}, calls: map[string]int{}}
	fromPlugin := &thing{state: map[string]string{}, calls: map[string]int{}}
	reg := adapters.NewRegistry()
	reg.Register("test::Thing", builtin)
	reg.Register("test::Other", builtin)
	b := ledger.Batch{EnvironmentID: "env-1", Version: 7, Plugins: []ledger.Plugin{
		{Name: "things", Runtime: "exec", Types: []string{"test::Thing"}, Artifacts: map[string]string{"linux/amd64": "sha256:00"}}}}
	thingID := resource.ID{Type: "test::Thing", Agent: "a", Attribute: "name", Value: "t1"}
	otherID := resource.ID{Type: "test::Other", Agent: "a", Attribute: "name", Value: "o1"}
	ctx := context.Background()

	ex := &Executor{Adapters: reg, Name: "e1"}
	if _, err := ex.handler(ctx, b, thingID); adapters.ClassOf(err) != adapters.ClassPermanent ||
		err == nil || !strings.Contains(err.Error(), "adapter plugin things") || !strings.Contains(err.Error(), "runs no plugins") {
		t.Errorf("no plugin host: err = %v, want permanent naming plugin things", err)
	}

	fp := &fakePlugins{h: fromPlugin}
	ex.Plugins = fp
	if h, err := ex.handler(ctx, b, thingID); err != nil || h != adapters.Handler(fromPlugin) {
		t.Errorf("plugin type: handler %v, %v; want the plugin's", h, err)
	}
	if len(fp.asked) != 1 || fp.asked[0] != "env-1 things test::Thing" {
		t.Errorf("the host was asked %q", fp.asked)
	}
	if h, err := ex.handler(ctx, b, otherID); err != nil || h != adapters.Handler(builtin) {
		t.Errorf("built-in type: handler %v, %v; want the built-in", h, err)
	}

	for _, cause := range []error{adapters.Permanent(errors.New("artifact sha256:00 has digest sha256:11")),
		adapters.Transient(errors.New("plugin did not start"))} {
		fp.err = cause
		_, err := ex.handler(ctx, b, thingID)
		if adapters.ClassOf(err) != adapters.ClassOf(cause) || !strings.Contains(err.Error(), "adapter plugin things") {
			t.Errorf("host error %v: got %v (class %s), want its class, naming the plugin", cause, err, adapters.ClassOf(err))
		}
	}
}
