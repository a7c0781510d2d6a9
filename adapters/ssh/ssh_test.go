package ssh_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	iofs "io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/adapters/ssh"
	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/sshtest"
)

// handler returns the registered handler of typ.
func handler(t testing.TB, typ string) adapters.Handler {
	t.Helper()
	r := adapters.NewRegistry()
	ssh.Register(r)
	h, ok := r.Lookup(typ)
	if !ok {
		t.Fatalf("%s is not registered", typ)
	}
	return h
}

// res returns the desired state of typ at path on srv, with attrs.
func res(srv *sshtest.Server, typ, path string, attrs map[string]any) adapters.Resource {
	a := srv.Attrs()
	a["path"] = path
	for k, v := range attrs {
		if v == nil {
			delete(a, k)
			continue
		}
		a[k] = v
	}
	return adapters.Resource{
		ID:         resource.ID{Type: typ, Agent: "local", Attribute: "path", Value: path},
		Attributes: a,
	}
}

// lexists checks the target without the adapter: it is this machine.
func lexists(path string, mode iofs.FileMode) func(t testing.TB) bool {
	return func(t testing.TB) bool {
		t.Helper()
		fi, err := os.Lstat(path)
		switch {
		case err == nil:
			return fi.Mode().Type() == mode
		case errors.Is(err, iofs.ErrNotExist):
			return false
		default:
			t.Fatalf("lstat %s: %v", path, err)
			return false
		}
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestFileConformance(t *testing.T) {
	srv := sshtest.Start(t)
	path := filepath.Join(t.TempDir(), "etc", "motd")
	h := handler(t, ssh.FileType)
	conformance.Run(t, conformance.Case{
		Handler: h,
		Desired: res(srv, ssh.FileType, path, map[string]any{"content": "hello\n", "mode": "0640", "owner": "root", "group": "0"}),
		Updated: res(srv, ssh.FileType, path, map[string]any{"content": "hello, world\n", "content_hash": sha("hello, world\n"),
			"mode": "0600", "owner": "daemon", "group": "daemon"}),
		Invalid: map[string]adapters.Resource{
			"path":         res(srv, ssh.FileType, path, map[string]any{"path": "etc/motd", "content": "x"}),
			"mode":         res(srv, ssh.FileType, path, map[string]any{"content": "x", "mode": "644"}),
			"content_hash": res(srv, ssh.FileType, path, map[string]any{"content": "x", "content_hash": sha("y")}),
			"owner":        res(srv, ssh.FileType, path, map[string]any{"content": "x", "owner": "intend-no-such-user"}),
			"host":         res(srv, ssh.FileType, path, map[string]any{"content": "x", "host": nil}),
			"port":         res(srv, ssh.FileType, path, map[string]any{"content": "x", "port": 70000}),
			"private_key":  res(srv, ssh.FileType, path, map[string]any{"content": "x", "private_key": "not a key"}),
			"host_key":     res(srv, ssh.FileType, path, map[string]any{"content": "x", "host_key": "ssh-ed25519 notbase64"}),
		},
		Exists: lexists(path, 0),
	})
}

func TestDirectoryConformance(t *testing.T) {
	srv := sshtest.Start(t)
	path := filepath.Join(t.TempDir(), "srv", "data")
	conformance.Run(t, conformance.Case{
		Handler: handler(t, ssh.DirectoryType),
		Desired: res(srv, ssh.DirectoryType, path, map[string]any{"mode": "0750"}),
		Updated: res(srv, ssh.DirectoryType, path, map[string]any{"mode": "0700", "owner": "daemon", "group": "daemon"}),
		Invalid: map[string]adapters.Resource{
			"mode":        res(srv, ssh.DirectoryType, path, map[string]any{"mode": "1777"}),
			"group":       res(srv, ssh.DirectoryType, path, map[string]any{"group": "intend-no-such-group"}),
			"user":        res(srv, ssh.DirectoryType, path, map[string]any{"user": ""}),
			"known_hosts": res(srv, ssh.DirectoryType, path, map[string]any{"known_hosts": "relative/known_hosts", "host_key": nil}),
		},
		Exists: lexists(path, iofs.ModeDir),
	})
}

func TestSymlinkConformance(t *testing.T) {
	srv := sshtest.Start(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "etc", "current")
	conformance.Run(t, conformance.Case{
		Handler: handler(t, ssh.SymlinkType),
		Desired: res(srv, ssh.SymlinkType, path, map[string]any{"target": "../releases/v1"}),
		Updated: res(srv, ssh.SymlinkType, path, map[string]any{"target": filepath.Join(dir, "releases", "v2")}),
		Invalid: map[string]adapters.Resource{
			"target": res(srv, ssh.SymlinkType, path, map[string]any{"target": ""}),
			"owner":  res(srv, ssh.SymlinkType, path, map[string]any{"target": "x", "owner": "root"}),
		},
		Exists: lexists(path, iofs.ModeSymlink),
	})
	// The link points where it was told, as the kernel reads it.
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("after the suite: %v, want the link purged", err)
	}
}

// TestSymlinkTargetOrder: SFTP servers disagree on the order of the
// SYMLINK request's arguments; the link must point at target, not the
// reverse.
func TestSymlinkTargetOrder(t *testing.T) {
	srv := sshtest.Start(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "link")
	if _, err := adapters.Run(context.Background(), handler(t, ssh.SymlinkType), adapters.NewContext(),
		res(srv, ssh.SymlinkType, path, map[string]any{"target": "some/where"}), false); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(path); err != nil || got != "some/where" {
		t.Errorf("readlink = %q %v, want some/where", got, err)
	}
}

// TestHostKeyVerified: a host that presents another key than the intended
// one, or that known_hosts does not know, is refused before anything is
// done, with a permanent error naming the host.
func TestHostKeyVerified(t *testing.T) {
	srv := sshtest.Start(t)
	_, otherHostKey := sshtest.NewKey(t)
	emptyKnown := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(emptyKnown, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	otherKnown := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(otherKnown, []byte("[127.0.0.1]:"+itoa(srv.Port)+" "+otherHostKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		reason  string
		attrs   map[string]any
		wantMsg string
	}{
		{"wrong host_key", "the host must present the pinned key",
			map[string]any{"host_key": otherHostKey}, "does not match \"host_key\""},
		{"unknown in known_hosts", "a host known_hosts does not know is not trusted on first use",
			map[string]any{"host_key": nil, "known_hosts": emptyKnown}, "is unknown"},
		{"missing known_hosts", "no file, no trust",
			map[string]any{"host_key": nil, "known_hosts": filepath.Join(t.TempDir(), "none")}, "is unknown"},
		{"mismatch in known_hosts", "a changed host key is refused",
			map[string]any{"host_key": nil, "known_hosts": otherKnown}, "does not match known_hosts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			for _, dryRun := range []bool{true, false} {
				_, err := adapters.Run(context.Background(), handler(t, ssh.FileType), adapters.NewContext(),
					res(srv, ssh.FileType, path, merge(map[string]any{"content": "x"}, c.attrs)), dryRun)
				if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), c.wantMsg) ||
					!strings.Contains(err.Error(), "127.0.0.1:"+itoa(srv.Port)) {
					t.Errorf("%s (dry-run %t): error %v, want permanent %q naming the host", c.reason, dryRun, err, c.wantMsg)
				}
			}
			if _, err := os.Lstat(path); !os.IsNotExist(err) {
				t.Errorf("%s: the file was created: %v", c.reason, err)
			}
		})
	}

	// The known_hosts file that knows the host works.
	path := filepath.Join(t.TempDir(), "f")
	if _, err := adapters.Run(context.Background(), handler(t, ssh.FileType), adapters.NewContext(),
		res(srv, ssh.FileType, path, map[string]any{"content": "x", "host_key": nil, "known_hosts": srv.KnownHosts}), false); err != nil {
		t.Fatalf("with the server's known_hosts: %v", err)
	}
}

// TestConnectionErrors: a refused key is permanent (retrying the same key
// cannot help), an unreachable port unavailable (the host may come back;
// the resource is not failed).
func TestConnectionErrors(t *testing.T) {
	srv := sshtest.Start(t)
	strangerKey, _ := sshtest.NewKey(t)
	closed, err := childproc.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		reason    string
		attrs     map[string]any
		wantClass adapters.Class
		wantMsg   string
	}{
		{"key not authorized", "the host refuses the key", map[string]any{"private_key": strangerKey},
			adapters.ClassPermanent, "authenticate to 127.0.0.1:" + itoa(srv.Port) + " as root"},
		{"unknown user", "the host refuses a user it does not have", map[string]any{"user": "intend-nobody"},
			adapters.ClassPermanent, "as intend-nobody"},
		{"closed port", "nothing listens: the network or a stopped host", map[string]any{"port": closed},
			adapters.ClassUnavailable, "connect to 127.0.0.1:" + itoa(closed)},
		{"encrypted key", "a passphrase cannot be typed", map[string]any{"private_key": encryptedKey(t)},
			adapters.ClassPermanent, "passphrase"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			_, err := adapters.Run(context.Background(), handler(t, ssh.FileType), adapters.NewContext(),
				res(srv, ssh.FileType, path, merge(map[string]any{"content": "x"}, c.attrs)), false)
			if adapters.ClassOf(err) != c.wantClass || !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("%s: error %v, want %s %q", c.reason, err, c.wantClass, c.wantMsg)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("%s: the error shows the key: %v", c.reason, err)
			}
		})
	}
}

// encryptedKey is a private key protected by a passphrase.
func encryptedKey(t *testing.T) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret phrase"))
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block))
}

// TestPrivateKeyFromSecret: the key given as a secret reference reaches
// the adapter through the engine, and its text is recorded nowhere.
func TestPrivateKeyFromSecret(t *testing.T) {
	srv := sshtest.Start(t)
	path := filepath.Join(t.TempDir(), "from-secret")
	r := res(srv, ssh.FileType, path, map[string]any{
		"content":     "secret key, public content\n",
		"private_key": map[string]any{"secret": "file:" + filepath.Base(srv.ClientKeyFile)},
	})
	// The key is read from the secrets directory, as an executor's
	// --secrets-dir.
	secrets := &adapters.Secrets{Dir: filepath.Dir(srv.ClientKeyFile)}
	before, _ := json.Marshal(r.Attributes)
	for i, want := range []adapters.Operation{adapters.OpCreate, adapters.OpNone} {
		hc := adapters.NewContext(adapters.WithSecrets(secrets))
		out, err := adapters.Run(context.Background(), handler(t, ssh.FileType), hc, r, false)
		hc.Close()
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if out.Action != want {
			t.Errorf("run %d: action %q, want %q", i, out.Action, want)
		}
		recorded, _ := json.Marshal(map[string]any{"diff": out.Diff, "logs": hc.Logs(), "facts": hc.Facts()})
		for _, line := range keyLines(srv.ClientKey) {
			if strings.Contains(string(recorded), line) {
				t.Errorf("run %d: the key's text is in the diff, logs or facts: %s", i, recorded)
			}
		}
		if i == 0 && !strings.Contains(string(recorded), `"private_key":{"from":null,"to":{"secret":"file:`) {
			t.Errorf("the diff should show the reference: %s", recorded)
		}
	}
	if after, _ := json.Marshal(r.Attributes); string(after) != string(before) {
		t.Errorf("the desired attributes were changed: %s, want %s", after, before)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "secret key, public content\n" {
		t.Errorf("file = %q %v", b, err)
	}
}

// keyLines are the lines of a PEM key's body, each long and distinctive
// enough that finding one means the key leaked.
func keyLines(pemText string) []string {
	var out []string
	for _, l := range strings.Split(pemText, "\n") {
		if len(l) >= 20 && !strings.HasPrefix(l, "-----") {
			out = append(out, l)
		}
	}
	return out
}

// TestFileOverSSH checks the behaviours that differ between the local file
// system and SFTP: atomic replace of an existing file, creation that finds
// a file already there, pinned files by hash, numeric owners, a non-empty
// directory refused.
func TestFileOverSSH(t *testing.T) {
	srv := sshtest.Start(t)
	ctx := context.Background()
	dir := t.TempDir()
	file := handler(t, ssh.FileType)
	directory := handler(t, ssh.DirectoryType)
	path := filepath.Join(dir, "a", "b.txt")

	steps := []struct {
		name       string
		reason     string
		h          adapters.Handler
		r          adapters.Resource
		wantAction adapters.Operation
		wantErr    string
		check      func(t *testing.T)
	}{
		{"create", "a file with parents", file,
			res(srv, ssh.FileType, path, map[string]any{"content": "one\n", "mode": "0600", "owner": "daemon", "group": "1"}),
			"create", "", func(t *testing.T) { wantFile(t, path, "one\n", 0o600, 1, 1) }},
		{"rewrite", "a content change replaces the file, keeping the owner it is not told", file,
			res(srv, ssh.FileType, path, map[string]any{"content": "two\n", "mode": "0644"}),
			"update", "", func(t *testing.T) { wantFile(t, path, "two\n", 0o644, 1, 1) }},
		{"pinned", "a file pinned by hash that matches is up to date", file,
			res(srv, ssh.FileType, path, map[string]any{"content": nil, "content_hash": sha("two\n")}),
			"none", "", nil},
		{"pinned, numeric owner", "metadata of a pinned file is changed in place", file,
			res(srv, ssh.FileType, path, map[string]any{"content": nil, "content_hash": sha("two\n"), "owner": "0"}),
			"update", "", func(t *testing.T) { wantFile(t, path, "two\n", 0o644, 0, 1) }},
		{"pinned, differs", "intend cannot write a file it knows only by hash", file,
			res(srv, ssh.FileType, path, map[string]any{"content": nil, "content_hash": sha("three\n")}),
			"", "intend cannot write it", func(t *testing.T) { wantFile(t, path, "two\n", 0o644, 0, 1) }},
		{"directory not empty", "a purge of a directory with entries is refused, over SFTP too", directory,
			purged(res(srv, ssh.DirectoryType, filepath.Dir(path), nil)),
			"", "is not empty", func(t *testing.T) { wantFile(t, path, "two\n", 0o644, 0, 1) }},
		{"purge", "the file is removed", file,
			purged(res(srv, ssh.FileType, path, nil)),
			"delete", "", func(t *testing.T) {
				if _, err := os.Lstat(path); !os.IsNotExist(err) {
					t.Errorf("file still there: %v", err)
				}
			}},
	}
	for _, s := range steps {
		hc := adapters.NewContext()
		out, err := adapters.Run(ctx, s.h, hc, s.r, false)
		hc.Close()
		switch {
		case s.wantErr != "":
			if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), s.wantErr) ||
				!strings.Contains(err.Error(), "root@127.0.0.1:") {
				t.Errorf("%s (%s): error %v, want permanent %q naming the host", s.name, s.reason, err, s.wantErr)
			}
		case err != nil:
			t.Fatalf("%s (%s): %v", s.name, s.reason, err)
		case out.Action != s.wantAction:
			t.Errorf("%s (%s): action %q, want %q (diff %v)", s.name, s.reason, out.Action, s.wantAction, out.Diff)
		}
		if s.check != nil {
			s.check(t)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// TestCreateFindsExisting: Create called on what is already there (a retry
// after a crash) succeeds over SFTP, which reports EEXIST only as failure.
func TestCreateFindsExisting(t *testing.T) {
	srv := sshtest.Start(t)
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	hc := adapters.NewContext()
	defer hc.Close()
	if err := handler(t, ssh.DirectoryType).Create(context.Background(), hc,
		res(srv, ssh.DirectoryType, dir, map[string]any{"mode": "0711"})); err != nil {
		t.Fatalf("create of an existing directory: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("directory = %v %v, want mode 0711", fi, err)
	}
	if !slices.Contains(messages(hc), "directory already exists") {
		t.Errorf("logs %q, want the existing directory noticed", messages(hc))
	}
}

func TestRegister(t *testing.T) {
	r := adapters.NewRegistry()
	ssh.Register(r)
	want := []string{ssh.DirectoryType, ssh.FileType, ssh.SymlinkType}
	if got := r.Types(); !slices.Equal(got, want) {
		t.Errorf("types %v, want %v", got, want)
	}
}

// TestConnectionAttributesNotObserved: the connection attributes say how
// to reach the host, not what it holds: changing them changes nothing.
func TestConnectionAttributesNotObserved(t *testing.T) {
	srv := sshtest.Start(t)
	path := filepath.Join(t.TempDir(), "f")
	h := handler(t, ssh.FileType)
	if _, err := adapters.Run(context.Background(), h, adapters.NewContext(),
		res(srv, ssh.FileType, path, map[string]any{"content": "x"}), false); err != nil {
		t.Fatal(err)
	}
	out, err := adapters.Run(context.Background(), h, adapters.NewContext(),
		res(srv, ssh.FileType, path, map[string]any{"content": "x", "host_key": nil, "known_hosts": srv.KnownHosts,
			"port": json.Number(itoa(srv.Port)), "user": "root"}), false)
	if err != nil || out.Action != "none" {
		t.Errorf("other connection attributes: %q %v, want none", out.Action, err)
	}
}

func wantFile(t *testing.T, path, content string, perm os.FileMode, uid, gid uint32) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if string(b) != content || fi.Mode().Perm() != perm || st.Uid != uid || st.Gid != gid {
		t.Errorf("%s = %q %04o %d:%d, want %q %04o %d:%d", path, b, fi.Mode().Perm(), st.Uid, st.Gid,
			content, perm, uid, gid)
	}
}

func purged(r adapters.Resource) adapters.Resource {
	r.Purged = true
	return r
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func messages(hc *adapters.Context) []string {
	var out []string
	for _, l := range hc.Logs() {
		out = append(out, l.Message)
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestAgentAuthentication: without private_key, the keys of the SSH agent
// at SSH_AUTH_SOCK authenticate; with neither, the error says what to give.
func TestAgentAuthentication(t *testing.T) {
	srv := sshtest.Start(t)
	key, err := gossh.ParseRawPrivateKey([]byte(srv.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: key}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				agent.ServeAgent(keyring, c)
			}()
		}
	}()

	path := filepath.Join(t.TempDir(), "f")
	r := res(srv, ssh.FileType, path, map[string]any{"content": "by agent\n", "private_key": nil})
	t.Setenv("SSH_AUTH_SOCK", sock)
	if _, err := adapters.Run(context.Background(), handler(t, ssh.FileType), adapters.NewContext(), r, false); err != nil {
		t.Fatalf("with the agent: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "by agent\n" {
		t.Errorf("file = %q %v", b, err)
	}

	t.Setenv("SSH_AUTH_SOCK", "")
	_, err = adapters.Run(context.Background(), handler(t, ssh.FileType), adapters.NewContext(), r, false)
	if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), `"private_key" is not given and there is no SSH agent`) {
		t.Errorf("without key or agent: %v, want a permanent error asking for private_key", err)
	}
}
