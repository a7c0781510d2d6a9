package adapters_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
)

// The values in secretsFixture; none may show in an error.
const (
	canary     = "CANARY-outside-the-secrets-dir"
	dbPassword = "S3CRETPW"
)

// secretsFixture makes a secrets directory beside a file that holds the
// canary, with the ways out of the directory a reference could try:
//
//	secrets/pg                  "pw-inside\n"
//	secrets/sub/key             "key-inside"
//	secrets/in -> pg            a relative link that stays inside
//	secrets/..2026_11_24/token  "token-inside", reached as Kubernetes mounts
//	secrets/..data -> ..2026_11_24, secrets/token -> ..data/token
//	secrets/out -> ../outside   a relative link out
//	secrets/abs -> /…/outside   an absolute link out
//	secrets/up -> ..            a directory link out
//	outside                     the canary
func secretsFixture(t testing.TB) (dir, outside string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "secrets")
	outside = filepath.Join(base, "outside")
	files := map[string]string{
		outside:                                     canary + "\n",
		filepath.Join(dir, "pg"):                    "pw-inside\n",
		filepath.Join(dir, "sub", "key"):            "key-inside",
		filepath.Join(dir, "..2026_11_24", "token"): "token-inside\r\n",
	}
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"in": "pg", "..data": "..2026_11_24", "token": "..data/token",
		"out": "../outside", "abs": outside, "up": "..",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, outside
}

// fixtureEnv is an executor's environment: its own settings beside the
// variables set aside for secrets.
func fixtureEnv(name string) (string, bool) {
	v, ok := map[string]string{
		"INTEND_DATABASE_URL":     "postgres://u:" + dbPassword + "@h/db",
		"INTEND_TEMPORAL_API_KEY": canary,
		"INTEND_SECRET_PG":        "env-inside",
		"APP_PG":                  "custom-inside",
	}[name]
	return v, ok
}

func TestSecretLookup(t *testing.T) {
	t.Parallel()
	dir, outside := secretsFixture(t)
	withDir := &adapters.Secrets{Dir: dir, LookupEnv: fixtureEnv}
	custom := &adapters.Secrets{Dir: dir, EnvPrefix: "APP_", LookupEnv: fixtureEnv}
	cases := []struct {
		why     string
		secrets *adapters.Secrets
		ref     string
		want    string // the value; "" when refused
		wantErr string // what the refusal says
	}{
		{"a file in the directory resolves, its newline dropped", withDir, "file:pg", "pw-inside", ""},
		{"a file in a subdirectory resolves", withDir, "file:sub/key", "key-inside", ""},
		{"a relative symlink that stays inside resolves", withDir, "file:in", "pw-inside", ""},
		{"Kubernetes secret volumes link through ..data, a name and not ..", withDir, "file:token", "token-inside", ""},
		{"an absolute path is refused, even one inside the directory", withDir, "file:" + filepath.Join(dir, "pg"),
			"", "relative path inside the secrets directory"},
		{"an absolute path out is refused", withDir, "file:" + outside, "", "relative path"},
		{"the executor's own environment is no file: reference", withDir, "file:/proc/self/environ", "", "relative path"},
		{".. is refused", withDir, "file:../outside", "", "without .."},
		{".. is refused even when the path comes back inside", withDir, "file:sub/../pg", "", "without .."},
		{".. is refused with a backslash too", withDir, `file:..\outside`, "", "without .."},
		{"a symlink out of the directory is refused", withDir, "file:out", "", "secrets directory"},
		{"an absolute symlink is refused", withDir, "file:abs", "", "secrets directory"},
		{"a symlinked directory out is refused", withDir, "file:up/outside", "", "secrets directory"},
		{"a missing file is named", withDir, "file:nope", "", "read nope in the secrets directory"},
		{"no secrets directory: no file resolves", &adapters.Secrets{LookupEnv: fixtureEnv}, "file:pg", "", "no --secrets-dir"},
		{"a nil Secrets resolves no file either", nil, "file:pg", "", "no --secrets-dir"},
		{"a secrets directory that does not exist", &adapters.Secrets{Dir: filepath.Join(dir, "nope")}, "file:pg",
			"", "secrets directory"},
		{"a variable without the prefix is refused", withDir, "env:INTEND_DATABASE_URL", "",
			"only variables whose names start with INTEND_SECRET_"},
		{"the prefix must start the name", withDir, "env:X_INTEND_SECRET_PG", "", "start with INTEND_SECRET_"},
		{"a variable with the prefix resolves", withDir, "env:INTEND_SECRET_PG", "env-inside", ""},
		{"an unset variable is named", withDir, "env:INTEND_SECRET_NOPE", "", "INTEND_SECRET_NOPE is not set"},
		{"a custom prefix resolves its variables", custom, "env:APP_PG", "custom-inside", ""},
		{"a custom prefix replaces the default", custom, "env:INTEND_SECRET_PG", "", "start with APP_"},
		{"a nil Secrets keeps the default prefix", nil, "env:INTEND_DATABASE_URL", "", "start with INTEND_SECRET_"},
	}
	for _, c := range cases {
		got, err := c.secrets.Lookup(c.ref)
		if c.wantErr == "" {
			if err != nil || got != c.want {
				t.Errorf("%s: Lookup(%q) = %q, %v; want %q", c.why, c.ref, got, err, c.want)
			}
			continue
		}
		if err == nil || got != "" || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: Lookup(%q) = %q, %v; want a refusal saying %q", c.why, c.ref, got, err, c.wantErr)
			continue
		}
		for _, v := range []string{canary, dbPassword, "pw-inside", "key-inside", "token-inside", "env-inside", "custom-inside"} {
			if strings.Contains(err.Error(), v) {
				t.Errorf("%s: the error holds a value: %v", c.why, err)
			}
		}
	}
}

// TestRunRefusesSecretsOutOfBounds: through the engine, a reference to
// the executor's own environment (as a file or a variable) is a permanent
// error naming the attribute, without the value, and the adapter is not
// called.
func TestRunRefusesSecretsOutOfBounds(t *testing.T) {
	t.Parallel()
	dir, _ := secretsFixture(t)
	secrets := &adapters.Secrets{Dir: dir, LookupEnv: fixtureEnv}
	for _, ref := range []string{"file:/proc/self/environ", "env:INTEND_DATABASE_URL", "file:out"} {
		h := &recorder{}
		_, err := adapters.Run(context.Background(), h, adapters.NewContext(adapters.WithSecrets(secrets)),
			role(map[string]any{"password": map[string]any{"secret": ref}}), false)
		if err == nil || adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), "attribute password") {
			t.Errorf("%s: Run = %v (class %s), want a permanent error naming attribute password", ref, err, adapters.ClassOf(err))
		} else if strings.Contains(err.Error(), dbPassword) || strings.Contains(err.Error(), canary) ||
			strings.Contains(err.Error(), "PATH=") {
			t.Errorf("%s: the error holds a value: %v", ref, err)
		}
		if len(h.calls) != 0 {
			t.Errorf("%s: the adapter was called (%v)", ref, h.calls)
		}
	}
}

// FuzzSecretLookup: whatever the reference, Lookup returns a value set
// aside for secrets (a file inside the directory, a variable with the
// prefix) or an error, never the canary outside, and never panics.
func FuzzSecretLookup(f *testing.F) {
	dir, outside := secretsFixture(f)
	secrets := &adapters.Secrets{Dir: dir, LookupEnv: func(name string) (string, bool) {
		if strings.HasPrefix(name, adapters.DefaultSecretEnvPrefix) {
			return "env-inside", true
		}
		return canary, true // every other variable is the executor's own
	}}
	for _, seed := range []string{"file:pg", "file:sub/key", "file:in", "file:token", "file:../outside",
		"file:" + outside, "file:out", "file:abs", "file:up/outside", "file:up/secrets/pg", "file:./pg",
		"file:sub//../../outside", `file:..\outside`, "file:pg\x00", "file:", "file:.", "env:INTEND_SECRET_X",
		"env:INTEND_DATABASE_URL", "env:", ":", "secret"} {
		f.Add(seed)
	}
	allowed := map[string]bool{"pw-inside": true, "key-inside": true, "token-inside": true, "env-inside": true}
	f.Fuzz(func(t *testing.T, ref string) {
		got, err := secrets.Lookup(ref)
		if err != nil {
			if got != "" || strings.Contains(err.Error(), canary) {
				t.Fatalf("Lookup(%q) = %q, %v: a refusal holds a value", ref, got, err)
			}
			return
		}
		if !allowed[got] {
			t.Fatalf("Lookup(%q) = %q: not a value set aside for secrets", ref, got)
		}
	})
}

// TestSecretLookupRefusesNonRegularFiles: a file: reference to anything
// but a regular file is refused at once, naming what it is: a named pipe
// (whose open and read block until someone writes: it held the batch), a
// link to one, a directory, a socket, a device, and a file too large to
// be a secret. The refusal holds no value.
func TestSecretLookupRefusesNonRegularFiles(t *testing.T) {
	t.Parallel()
	dir, _ := secretsFixture(t)
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A lookup blocked in the FIFO's open (before the fix) gets its
		// writer, and its end of file, here.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	if err := os.Symlink("pipe", filepath.Join(dir, "topipe")); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, adapters.MaxSecretFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ why, ref, wantErr string }{
		{"a named pipe", "file:pipe", "not a regular file (a named pipe)"},
		{"a link to a named pipe", "file:topipe", "not a regular file (a named pipe)"},
		{"a directory", "file:sub", "not a regular file (a directory)"},
		{"a socket (its open fails)", "file:sock", "read sock in the secrets directory"},
		{"a file over the limit", "file:big", "larger than 1048576 bytes"},
	}
	// A character device where this test may make one (root); elsewhere
	// the other cases stand.
	// 1<<8|3 is 1:3, /dev/null's numbers, as Linux encodes small ones.
	if err := syscall.Mknod(filepath.Join(dir, "null"), syscall.S_IFCHR|0o600, 1<<8|3); err == nil {
		cases = append(cases, struct{ why, ref, wantErr string }{"a character device", "file:null", "not a regular file (a character device)"})
	} else {
		t.Logf("no device node (%v): that case is not run", err)
	}
	s := &adapters.Secrets{Dir: dir}
	for _, c := range cases {
		type result struct {
			v   string
			err error
		}
		done := make(chan result, 1)
		go func() {
			v, err := s.Lookup(c.ref)
			done <- result{v, err}
		}()
		select {
		case r := <-done:
			if r.err == nil || r.v != "" || !strings.Contains(r.err.Error(), c.wantErr) {
				t.Errorf("%s: Lookup(%q) = %d bytes, %v; want a refusal saying %q", c.why, c.ref, len(r.v), r.err, c.wantErr)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: Lookup(%q) still blocks after 5 s", c.why, c.ref)
		}
	}
	// The regular files still resolve.
	if v, err := s.Lookup("file:pg"); err != nil || v != "pw-inside" {
		t.Errorf("Lookup(file:pg) = %q, %v", v, err)
	}
}
