package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters/netconf/session"
	"github.com/intendhq/intend/internal/netconftest"
	"github.com/intendhq/intend/internal/testenv/wait"
)

// copyExampleWith copies examples/NAME into a temporary directory
// (without its data) with each quoted string literal of replace (its
// keys) replaced by its value, quoted, and returns the project. A literal
// found in no file fails the test: the example changed under it.
func copyExampleWith(t *testing.T, name string, replace map[string]string) (dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "project")
	src := filepath.Join("../../examples", name)
	found := map[string]bool{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if d.Name() == "data" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for from, to := range replace {
			q := []byte(strconv.Quote(from))
			if bytes.Contains(b, q) {
				found[from] = true
				b = bytes.ReplaceAll(b, q, []byte(strconv.Quote(to)))
			}
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	for from := range replace {
		if !found[from] {
			t.Fatalf("examples/%s has no literal %q to replace", name, from)
		}
	}
	return dir
}

// TestExampleLSMNetconf walks examples/lsm-netconf as docs/lsm.md does,
// with the CLI alone, against a real netconfd reached over SSH: the
// model's device attributes point at it, its private key is a secret
// reference resolved by the embedded executor from its environment. The
// export deploys the model's own resource (the contact) to the device;
// an interface created through the inventory is in the device's running
// configuration once up; a leaf set on the device by hand is drift; the
// per-instance dry-run of an update shows the device's diff leaf by leaf,
// that drift included, and changes nothing; the update changes the device
// and removes the drift (operation replace); the delete removes the
// interface from the device and leaves the model's contact.
func TestExampleLSMNetconf(t *testing.T) {
	// Not parallel: see servertest.StartServer (and t.Setenv).
	srv := netconftest.Start(t)
	// The embedded executor, a child process, gets the variables of the
	// secret prefix from the server's environment.
	t.Setenv("INTEND_SECRET_R1_KEY", string(srv.PrivateKey))
	vars, _ := lsmServer(t, "lsmnc")
	dir := copyExampleWith(t, "lsm-netconf", map[string]string{
		"r1.lab.example.net": srv.Addr,
		"netops":             srv.User,
		"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBsY7tMk3Hq0l2h2VYg7z0x8v3rJcPZ0cL1p8e0Wc5nA": srv.HostKey,
	})
	if b, err := os.ReadFile(filepath.Join(dir, "main.cue")); err != nil || bytes.Contains(b, srv.PrivateKey) {
		t.Fatalf("the example holds the key itself, not a reference (%v)", err)
	}
	if out := ok(t, vars, "export", dir, "-d"); !strings.Contains(out, "service entities: interface (lifecycle simple)") {
		t.Fatalf("export:\n%s", out)
	}

	dev, err := session.Dial(ctxT(t), session.Config{Addr: srv.Addr, User: srv.User, PrivateKey: srv.PrivateKey, HostKey: srv.HostKey})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	get := func(filter string) string {
		t.Helper()
		data, err := dev.GetConfig(ctxT(t), session.Running, []byte(filter))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	const ifFilter = `<interfaces xmlns="urn:ietf:params:xml:ns:yang:ietf-interfaces"><interface><name>eth1</name></interface></interfaces>`
	eth1 := func() string { t.Helper(); return get(ifFilter) }

	// The model's own resource reaches the device with the release.
	wait.For(t, "the contact on the device", 30*time.Second, func() error {
		got := get(`<system xmlns="urn:ietf:params:xml:ns:yang:ietf-system"><contact/></system>`)
		return wait.Unless(strings.Contains(got, "<contact>noc@example.net</contact>"), "the device's system: %s", got)
	})

	out := ok(t, vars, "lsm", "catalog", "interface")
	for _, want := range []string{"identity:     name", "description", "rw+", `"ethernetCsmacd"`} {
		if !strings.Contains(out, want) {
			t.Errorf("catalog lacks %q:\n%s", want, out)
		}
	}

	out = ok(t, vars, "lsm", "create", "interface", "--attr", "name=eth1", "--attr", "description=uplink to core", "--wait", "up")
	if got := field(t, out, "active"); got != `{"description":"uplink to core","enabled":true,"name":"eth1","type":"ethernetCsmacd"}` {
		t.Errorf("create: active %s\n%s", got, out)
	}
	got := eth1()
	for _, want := range []string{"<name>eth1</name>", "<description>uplink to core</description>", "ethernetCsmacd</type>", "<enabled>true</enabled>"} {
		if !strings.Contains(got, want) {
			t.Errorf("the device's eth1 lacks %s:\n%s", want, got)
		}
	}

	// A leaf set on the device behind intend's back: drift, since the
	// example owns the whole entry (operation replace).
	if err := dev.EditConfig(ctxT(t), session.Candidate, []byte(`<interfaces xmlns="urn:ietf:params:xml:ns:yang:ietf-interfaces">`+
		`<interface><name>eth1</name><link-up-down-trap-enable>enabled</link-up-down-trap-enable></interface></interfaces>`),
		session.EditOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dev.Commit(ctxT(t), session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}

	// What the update would do: the desired state's change, and the
	// device's own diff per leaf, drift included; the device is left as
	// it was.
	const leaf = "config/ietf-interfaces:interfaces/interface[name=eth1]/"
	out = ok(t, vars, "lsm", "dryrun", "interface", "eth1", "--attr", "description=uplink to core via r2", "--attr", "enabled=false")
	t.Logf("intend lsm dryrun interface eth1:\n%s", out)
	_, targets, found := strings.Cut(out, "on the targets:")
	if !found {
		t.Fatalf("lsm dryrun shows nothing on the targets:\n%s", out)
	}
	for _, want := range []string{
		"modified    netconf::Config[r1,path=ietf-interfaces:interfaces/interface[name=eth1]]",
		leaf + `description: "uplink to core" → "uplink to core via r2"`,
		leaf + "enabled: true → false",
		leaf + `link-up-down-trap-enable: "enabled" → null`,
		"1 modified",
	} {
		if !strings.Contains(targets, want) {
			t.Errorf("lsm dryrun: no %q on the targets:\n%s", want, targets)
		}
	}
	if !strings.Contains(out, "validation: ok") || !strings.Contains(out, "1 modified, 0 unchanged") {
		t.Errorf("lsm dryrun:\n%s", out)
	}
	if got := eth1(); !strings.Contains(got, "<description>uplink to core</description>") || !strings.Contains(got, "<enabled>true</enabled>") ||
		!strings.Contains(got, "<link-up-down-trap-enable>enabled</link-up-down-trap-enable>") {
		t.Errorf("the device after the dry-run:\n%s", got)
	}

	// The update is a new version: its attempt dials the device while the
	// executor still holds the sessions of the versions before (the
	// model's, the create's), two, netconf::'s limit per device. They
	// are closed once a batch of the new version starts, not at the
	// cache's next periodic sweep (30 s).
	began := time.Now()
	out = ok(t, vars, "lsm", "update", "interface", "eth1", "--attr", "description=uplink to core via r2", "--attr", "enabled=false", "--wait", "up")
	if d := time.Since(began); d > 15*time.Second {
		t.Errorf("the update took %v to be up: its deploy waited for the device's sessions of earlier versions", d)
	}
	if !strings.Contains(field(t, out, "rollback"), `"description":"uplink to core"`) {
		t.Errorf("update:\n%s", out)
	}
	if got := eth1(); !strings.Contains(got, "<description>uplink to core via r2</description>") || !strings.Contains(got, "<enabled>false</enabled>") ||
		strings.Contains(got, "link-up-down-trap-enable") {
		t.Errorf("the device after the update (the leaf set by hand removed):\n%s", got)
	}

	ok(t, vars, "lsm", "delete", "interface", "eth1", "--wait", "terminated")
	if got := eth1(); strings.Contains(got, "eth1") {
		t.Errorf("eth1 is still on the device after the delete:\n%s", got)
	}
	if got := get(`<system xmlns="urn:ietf:params:xml:ns:yang:ietf-system"><contact/></system>`); !strings.Contains(got, "noc@example.net") {
		t.Errorf("the model's own contact went with the interface:\n%s", got)
	}
}

// ctxT is a context that ends with the test, or after a minute.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
