package adapters_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
)

// recorder is a handler over an in-memory target that records what it was
// handed and what was called; the optional capabilities are switched on by
// wrapping it.
type recorder struct {
	target map[string]any // nil: absent
	seen   []map[string]any
	calls  []string
}

func (r *recorder) Observe(_ context.Context, hc *adapters.Context, d adapters.Resource) (adapters.Observation, error) {
	r.calls = append(r.calls, "observe")
	r.seen = append(r.seen, d.Attributes)
	if r.target == nil {
		return adapters.Observation{}, nil
	}
	return adapters.Observation{Exists: true, Attributes: r.target}, nil
}

func (r *recorder) Create(_ context.Context, hc *adapters.Context, d adapters.Resource) error {
	r.calls = append(r.calls, "create")
	hc.Info("connecting", "password", d.Attributes["password"])
	r.target = d.Attributes
	return nil
}

func (r *recorder) Update(_ context.Context, hc *adapters.Context, d adapters.Resource, _ adapters.Diff) error {
	r.calls = append(r.calls, "update")
	r.target = d.Attributes
	if pw, _ := d.Attributes["password"].(string); pw == "refused" {
		return adapters.Permanent(errors.New("server said: password " + pw + " is too weak"))
	}
	return nil
}

func (r *recorder) Delete(context.Context, *adapters.Context, adapters.Resource) error {
	r.calls = append(r.calls, "delete")
	r.target = nil
	return nil
}

func role(attrs map[string]any) adapters.Resource {
	return adapters.Resource{ID: resource.MustParse("postgres::Role[db1,name=app]"), Attributes: attrs}
}

func TestRunResolvesAndMasksSecrets(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pg-app"), []byte("s3cr3t-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := &adapters.Secrets{Dir: dir, LookupEnv: func(name string) (string, bool) {
		if name == "INTEND_SECRET_PG_APP" {
			return "s3cr3t-env", true
		}
		return "", false
	}}
	h := &recorder{}
	ref := map[string]any{"secret": "env:INTEND_SECRET_PG_APP"}
	hc := adapters.NewContext(adapters.WithSecrets(secrets))
	desired := role(map[string]any{"name": "app", "password": ref,
		"options": map[string]any{"nested": []any{map[string]any{"secret": "file:pg-app"}}}})
	out, err := adapters.Run(context.Background(), h, hc, desired, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.seen[0]["password"]; got != "s3cr3t-env" {
		t.Fatalf("adapter was handed password %v, want the resolved value", got)
	}
	nested := h.seen[0]["options"].(map[string]any)["nested"].([]any)[0]
	if nested != "s3cr3t-file" {
		t.Fatalf("nested file reference resolved to %v, want the file's content without its newline", nested)
	}
	if _, ok := desired.Attributes["password"].(map[string]any); !ok {
		t.Fatal("Run replaced the reference in the caller's attributes")
	}
	// The diff records the reference, never the value.
	if c := out.Diff["password"]; !jsonEq(c.To, ref) {
		t.Fatalf("diff of a secret attribute: %+v, want To = the reference", c)
	}
	if b, _ := json.Marshal(out.Diff); strings.Contains(string(b), "s3cr3t") {
		t.Fatalf("diff holds a secret: %s", b)
	}
	if b, _ := json.Marshal(hc.Logs()); strings.Contains(string(b), "s3cr3t") || !strings.Contains(string(b), adapters.Masked) {
		t.Fatalf("log lines must mask the secret: %s", b)
	}

	// An update: the observed value (From) is masked too, and so is the
	// text of an adapter error, which keeps its class.
	h.target = map[string]any{"password": "s3cr3t-env-old"}
	secrets.LookupEnv = func(string) (string, bool) { return "refused", true }
	out, err = adapters.Run(context.Background(), h, adapters.NewContext(adapters.WithSecrets(secrets)),
		role(map[string]any{"password": ref}), false)
	if err == nil || strings.Contains(err.Error(), "refused") || adapters.ClassOf(err) != adapters.ClassPermanent {
		t.Fatalf("adapter error = %v (class %s); want it masked and still permanent", err, adapters.ClassOf(err))
	}
	if c := out.Diff["password"]; c.From != adapters.Masked || !jsonEq(c.To, ref) {
		t.Fatalf("update diff of a secret: %+v", c)
	}
}

func TestRunUnresolvableSecretIsPermanent(t *testing.T) {
	h := &recorder{}
	secrets := &adapters.Secrets{LookupEnv: func(string) (string, bool) { return "", false }}
	for name, ref := range map[string]string{
		"unset variable":              "env:INTEND_SECRET_NOPE",
		"variable without the prefix": "env:INTEND_DATABASE_URL",
		"file without a secrets dir":  "file:pg",
		"absolute file":               "file:/proc/self/environ",
		"unknown kind":                "vault:x",
		"no kind":                     "NOPE",
		"empty reference":             "env:",
	} {
		t.Run(name, func(t *testing.T) {
			hc := adapters.NewContext(adapters.WithSecrets(secrets))
			_, err := adapters.Run(context.Background(), h, hc, role(map[string]any{"password": map[string]any{"secret": ref}}), false)
			if err == nil || adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), "attribute password") {
				t.Fatalf("Run = %v (class %s), want a permanent error naming attribute password", err, adapters.ClassOf(err))
			}
		})
	}
	if len(h.calls) != 0 {
		t.Fatalf("the adapter was called (%v) although a secret did not resolve", h.calls)
	}
}

func TestRunWithoutSecretsUsesProcessEnvironment(t *testing.T) {
	t.Setenv("INTEND_SECRET_TEST", "from-env")
	h := &recorder{}
	_, err := adapters.Run(context.Background(), h, adapters.NewContext(),
		role(map[string]any{"password": map[string]any{"secret": "env:INTEND_SECRET_TEST"}}), true)
	if err != nil || h.seen[0]["password"] != "from-env" {
		t.Fatalf("Run = %v, adapter saw %v", err, h.seen)
	}
	// An object with other keys beside "secret" is plain data.
	h = &recorder{}
	plain := map[string]any{"secret": "env:INTEND_SECRET_TEST", "comment": "not a reference"}
	if _, err := adapters.Run(context.Background(), h, adapters.NewContext(), role(map[string]any{"x": plain}), true); err != nil {
		t.Fatal(err)
	}
	if !jsonEq(h.seen[0]["x"], plain) {
		t.Fatalf("a two-key object was treated as a reference: %v", h.seen[0]["x"])
	}
}

func TestSecretsMaskFacts(t *testing.T) {
	secrets := &adapters.Secrets{LookupEnv: func(string) (string, bool) { return "hunter2", true }}
	hc := adapters.NewContext(adapters.WithSecrets(secrets))
	if _, err := hc.ResolveSecrets(role(map[string]any{"password": map[string]any{"secret": "env:INTEND_SECRET_X"}})); err != nil {
		t.Fatal(err)
	}
	hc.SetFact("dsn", "postgres://app:hunter2@db1/app")
	if got := hc.Facts()["dsn"]; got != "postgres://app:"+adapters.Masked+"@db1/app" {
		t.Fatalf("fact = %v, want the secret masked", got)
	}
}

// capable adds the optional capabilities to a recorder.
type capable struct {
	*recorder
	validate error
}

func (c capable) Validate(_ context.Context, _ *adapters.Context, d adapters.Resource) error {
	c.calls = append(c.calls, "validate")
	return c.validate
}

func (c capable) Reload(context.Context, *adapters.Context, adapters.Resource) error {
	c.calls = append(c.calls, "reload")
	return nil
}

func (c capable) DiscoverFacts(_ context.Context, hc *adapters.Context, d adapters.Resource) error {
	c.calls = append(c.calls, "facts")
	hc.SetFact("seen", true)
	return nil
}

func TestRunCapabilities(t *testing.T) {
	ctx := context.Background()
	desired := role(map[string]any{"name": "app"})

	// Validation comes first; an unclassified refusal is permanent and
	// nothing else runs.
	r := &recorder{}
	_, err := adapters.Run(ctx, capable{recorder: r, validate: errors.New("attribute name: too long")}, adapters.NewContext(), desired, false)
	if adapters.ClassOf(err) != adapters.ClassPermanent || strings.Join(r.calls, ",") != "validate" {
		t.Fatalf("refused validation: err %v (class %s), calls %v", err, adapters.ClassOf(err), r.calls)
	}

	// A dry-run of a create: validate and observe only (nothing to
	// discover facts on).
	r = &recorder{}
	if _, err := adapters.Run(ctx, capable{recorder: r}, adapters.NewContext(), desired, true); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.calls, ","); got != "validate,observe" {
		t.Fatalf("dry-run of a create called %s", got)
	}

	// A deploy without an event: no reload; facts after the change.
	hc := adapters.NewContext()
	if _, err := adapters.Run(ctx, capable{recorder: r}, hc, desired, false); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.calls, ","); got != "validate,observe,validate,observe,create,facts" {
		t.Fatalf("deploy called %s", got)
	}
	if hc.Facts()["seen"] != true {
		t.Fatal("facts discovered were not kept on the context")
	}

	// An event: reload even though nothing changed, before facts.
	r.calls = nil
	out, err := adapters.Run(ctx, capable{recorder: r}, adapters.NewContext(adapters.WithEvent(true)), desired, false)
	if err != nil || out.Action != "none" {
		t.Fatal(out, err)
	}
	if got := strings.Join(r.calls, ","); got != "validate,observe,reload,facts" {
		t.Fatalf("event deploy called %s", got)
	}

	// Never a reload in a dry-run or for a purge.
	for _, c := range []struct {
		r      adapters.Resource
		dryRun bool
		want   string
	}{
		{desired, true, "validate,observe,facts"},
		{adapters.Resource{ID: desired.ID, Attributes: desired.Attributes, Purged: true}, false, "validate,observe,delete"},
	} {
		r.calls = nil
		if _, err := adapters.Run(ctx, capable{recorder: r}, adapters.NewContext(adapters.WithEvent(true)), c.r, c.dryRun); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(r.calls, ","); got != c.want {
			t.Fatalf("purged=%t dry-run=%t with an event called %s, want %s", c.r.Purged, c.dryRun, got, c.want)
		}
	}
}

func TestThrottledFor(t *testing.T) {
	err := adapters.ThrottledFor(errors.New("429 too many requests"), 30*time.Second)
	wrapped := errors.Join(errors.New("update"), err)
	if adapters.ClassOf(wrapped) != adapters.ClassThrottled || adapters.RetryAfterOf(wrapped) != 30*time.Second {
		t.Fatalf("class %s, retry after %s", adapters.ClassOf(wrapped), adapters.RetryAfterOf(wrapped))
	}
	if adapters.RetryAfterOf(adapters.Transient(errors.New("x"))) != 0 || adapters.RetryAfterOf(adapters.Throttled(errors.New("x"))) != 0 {
		t.Fatal("only ThrottledFor carries a delay")
	}
}

func jsonEq(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

type panicky struct{ recorder }

func (p *panicky) Create(_ context.Context, _ *adapters.Context, d adapters.Resource) error {
	panic("cannot use password " + d.Attributes["password"].(string))
}

func TestRunRecoversPanicsAndMasksThem(t *testing.T) {
	secrets := &adapters.Secrets{LookupEnv: func(string) (string, bool) { return "hunter2", true }}
	_, err := adapters.Run(context.Background(), &panicky{}, adapters.NewContext(adapters.WithSecrets(secrets)),
		role(map[string]any{"password": map[string]any{"secret": "env:INTEND_SECRET_X"}}), false)
	var pe *adapters.PanicError
	if !errors.As(err, &pe) || pe.Stack == "" || adapters.ClassOf(err) != adapters.ClassPermanent {
		t.Fatalf("Run = %v; want a permanent *PanicError with a stack", err)
	}
	if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "cannot use password "+adapters.Masked) {
		t.Fatalf("panic text %q: want the secret masked", err)
	}
}

// TestBeforeChange: the engine calls the BeforeChange hook just before it
// changes the target, with the operation, and never when nothing changes
// or in dry-run; a refusal stops the change and fails the attempt.
func TestBeforeChange(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		target map[string]any
		purged bool
		dryRun bool
		refuse bool
		want   []string // the hook's operations and the calls, in order
	}{
		{"create", nil, false, false, false, []string{"observe", "hook create", "create"}},
		{"update", map[string]any{"x": 1}, false, false, false, []string{"observe", "hook update", "update"}},
		{"delete", map[string]any{"x": 2}, true, false, false, []string{"observe", "hook delete", "delete"}},
		{"in place: nothing to record", map[string]any{"x": 2}, false, false, false, []string{"observe"}},
		{"dry-run changes nothing", nil, false, true, false, []string{"observe"}},
		{"a refused intent stops the change", nil, false, false, true, []string{"observe", "hook create"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := &recorder{target: c.target}
			hc := adapters.NewContext(adapters.WithBeforeChange(func(_ context.Context, op adapters.Operation) error {
				r.calls = append(r.calls, "hook "+string(op))
				if c.refuse {
					return errors.New("ledger gone")
				}
				return nil
			}))
			defer hc.Close()
			d := role(map[string]any{"x": 2})
			d.Purged = c.purged
			_, err := adapters.Run(context.Background(), r, hc, d, c.dryRun)
			if got := strings.Join(r.calls, ", "); got != strings.Join(c.want, ", ") {
				t.Errorf("calls = %s, want %s", got, strings.Join(c.want, ", "))
			}
			if c.refuse != (err != nil) || (c.refuse && !strings.Contains(err.Error(), "ledger gone")) {
				t.Errorf("err = %v, want an error only when the intent is refused", err)
			}
		})
	}
}
