package netconf_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/netconf"
	"github.com/intendhq/intend/adapters/netconf/session"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/netconftest"
)

func TestMain(m *testing.M) { netconftest.Main(m) }

var ifCount atomic.Int64

// ifName is an interface name of the test's own on the shared server.
func ifName() string {
	return fmt.Sprintf("nc%d-%d", time.Now().UnixNano()%1e6, ifCount.Add(1))
}

// device returns the connection attributes of srv.
func device(srv *netconftest.Server) map[string]any {
	return map[string]any{"address": srv.Addr, "user": srv.User, "private_key": string(srv.PrivateKey), "host_key": srv.HostKey}
}

// iface is the resource of one interface on srv.
func iface(srv *netconftest.Server, name string, leaves map[string]any) adapters.Resource {
	path := "ietf-interfaces:interfaces/interface[name=" + name + "]"
	entry := map[string]any{"name": name, "type": "iana-if-type:ethernetCsmacd"}
	maps.Copy(entry, leaves)
	attrs := device(srv)
	attrs["path"] = path
	attrs["config"] = map[string]any{"ietf-interfaces:interfaces": map[string]any{"interface": []any{entry}}}
	return adapters.Resource{ID: resource.ID{Type: netconf.ConfigType, Agent: "r1", Attribute: "path", Value: path}, Attributes: attrs}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// deployer runs attempts as an executor does: one cache, one scope (a
// version), a context per attempt.
type deployer struct {
	h     netconf.Config
	cache *adapters.Cache
	scope adapters.Scope
}

func newDeployer(t *testing.T) *deployer {
	d := &deployer{cache: adapters.NewCache(), scope: adapters.Scope{Environment: t.Name(), Version: 1}}
	t.Cleanup(d.cache.Close)
	return d
}

func (d *deployer) run(t *testing.T, r adapters.Resource, dryRun bool) (adapters.Outcome, *adapters.Context, error) {
	t.Helper()
	hc := adapters.NewContext(adapters.WithCache(d.cache), adapters.WithScope(d.scope))
	defer hc.Close()
	out, err := adapters.Run(ctxT(t), d.h, hc, r, dryRun)
	return out, hc, err
}

func (d *deployer) must(t *testing.T, r adapters.Resource, want adapters.Operation) adapters.Outcome {
	t.Helper()
	out, _, err := d.run(t, r, false)
	if err != nil {
		t.Fatalf("%s: %v", r.ID, err)
	}
	if out.Action != want {
		t.Fatalf("%s: %s %v, want %s", r.ID, out.Action, out.Diff, want)
	}
	return out
}

// direct is a session of the test's own, behind intend's back.
func direct(t *testing.T, srv *netconftest.Server) *session.Session {
	t.Helper()
	s, err := session.Dial(ctxT(t), session.Config{Addr: srv.Addr, User: srv.User, PrivateKey: srv.PrivateKey, HostKey: srv.HostKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func running(t testing.TB, s *session.Session, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data, err := s.GetConfig(ctx, session.Running, []byte(`<interfaces xmlns="urn:ietf:params:xml:ns:yang:ietf-interfaces"><interface><name>`+name+`</name></interface></interfaces>`))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestLifecycle: create, no-op, drift made by another session repaired,
// update, dry-run per leaf, delete of the list entry, against netconfd.
func TestLifecycle(t *testing.T) {
	srv := netconftest.Shared(t)
	d := newDeployer(t)
	other := direct(t, srv)
	name := ifName()
	r := iface(srv, name, map[string]any{"description": "uplink", "enabled": true})

	out, _, err := d.run(t, r, true)
	if err != nil || out.Action != adapters.OpCreate {
		t.Fatalf("dry-run of the create: %s %v %v", out.Action, out.Diff, err)
	}
	leaf := "config/ietf-interfaces:interfaces/interface[name=" + name + "]/"
	if c, ok := out.Diff[leaf+"description"]; !ok || c.From != nil || c.To != "uplink" {
		t.Errorf("dry-run of the create: %v, want %sdescription from nothing to uplink", out.Diff, leaf)
	}
	for k := range out.Diff {
		if !strings.HasPrefix(k, "config/") {
			t.Errorf("dry-run of the create names %s: the device's attributes are not state", k)
		}
	}
	if got := running(t, other, name); strings.Contains(got, name) {
		t.Fatalf("the dry-run created the interface: %s", got)
	}

	d.must(t, r, adapters.OpCreate)
	if got := running(t, other, name); !strings.Contains(got, "uplink") {
		t.Fatalf("after create, running holds %s", got)
	}
	d.must(t, r, adapters.OpNone)

	// Drift: the description changed behind intend's back.
	if err := other.EditConfig(ctxT(t), session.Candidate, []byte(`<interfaces xmlns="urn:ietf:params:xml:ns:yang:ietf-interfaces"><interface><name>`+name+`</name><description>by hand</description></interface></interfaces>`), session.EditOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(ctxT(t), session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	out = d.must(t, r, adapters.OpUpdate)
	if want := (adapters.Diff{leaf + "description": {From: "by hand", To: "uplink"}}); !equalDiff(out.Diff, want) {
		t.Errorf("drift repair: %v, want %v", out.Diff, want)
	}
	d.must(t, r, adapters.OpNone)

	// Update: a dry-run shows the one leaf, the deploy changes it.
	u := iface(srv, name, map[string]any{"description": "core", "enabled": true})
	out, _, err = d.run(t, u, true)
	if want := (adapters.Diff{leaf + "description": {From: "uplink", To: "core"}}); err != nil || !equalDiff(out.Diff, want) {
		t.Errorf("dry-run of the update: %v %v, want %v", out.Diff, err, want)
	}
	d.must(t, u, adapters.OpUpdate)
	if got := running(t, other, name); !strings.Contains(got, "core") {
		t.Fatalf("after update, running holds %s", got)
	}
	d.must(t, u, adapters.OpNone)

	// Delete of the list entry.
	u.Purged = true
	d.must(t, u, adapters.OpDelete)
	if got := running(t, other, name); strings.Contains(got, name) {
		t.Fatalf("after delete, running holds %s", got)
	}
	d.must(t, u, adapters.OpNone)
}

func equalDiff(a, b adapters.Diff) bool {
	if len(a) != len(b) {
		return false
	}
	for k, c := range a {
		w, ok := b[k]
		if !ok || fmt.Sprint(c.From) != fmt.Sprint(w.From) || fmt.Sprint(c.To) != fmt.Sprint(w.To) {
			return false
		}
	}
	return true
}

// TestFactsAreCapabilities: the capabilities the device announced are
// the resource's facts.
func TestFactsAreCapabilities(t *testing.T) {
	srv := netconftest.Shared(t)
	d := newDeployer(t)
	_, hc, err := d.run(t, iface(srv, ifName(), nil), true)
	if err != nil {
		t.Fatal(err)
	}
	caps, _ := hc.Facts()["capabilities"].([]string)
	if !slices.ContainsFunc(caps, func(c string) bool { return strings.Contains(c, ":candidate") }) {
		t.Errorf("facts %v, want the capabilities, :candidate among them", hc.Facts())
	}
}

// TestDeviceRefusesValue: an rpc-error of the device (an interface type
// that is no identity netconfd knows) is permanent, names the
// error-path and the message, and leaves nothing behind.
func TestDeviceRefusesValue(t *testing.T) {
	srv := netconftest.Shared(t)
	d := newDeployer(t)
	name := ifName()
	r := iface(srv, name, map[string]any{"type": "iana-if-type:noSuchType"})
	_, _, err := d.run(t, r, false)
	if err == nil {
		t.Fatal("the device accepted an unknown identity")
	}
	t.Logf("refused: %v", err)
	var rpc session.RPCError
	if adapters.ClassOf(err) != adapters.ClassPermanent || !errors.As(err, &rpc) || rpc.Message == "" {
		t.Fatalf("error %v (class %s), want a permanent rpc-error", err, adapters.ClassOf(err))
	}
	if rpc.Path != "" && !strings.Contains(err.Error(), rpc.Path) {
		t.Errorf("error %q does not name the error-path %s", err, rpc.Path)
	}
	if got := running(t, direct(t, srv), name); strings.Contains(got, name) {
		t.Errorf("the refused interface is in running: %s", got)
	}
	// The candidate was discarded: a good resource commits alone.
	d.must(t, iface(srv, ifName(), nil), adapters.OpCreate)
}

// TestLockHeldByAnother: a lock another session holds is transient, and
// the change goes through once it is released.
func TestLockHeldByAnother(t *testing.T) {
	srv := netconftest.Shared(t)
	d := newDeployer(t)
	other := direct(t, srv)
	if err := other.Lock(ctxT(t), session.Running); err != nil {
		t.Fatal(err)
	}
	r := iface(srv, ifName(), nil)
	_, _, err := d.run(t, r, false)
	if err == nil || adapters.ClassOf(err) != adapters.ClassTransient {
		t.Fatalf("with the lock held elsewhere: %v (class %s), want transient", err, adapters.ClassOf(err))
	}
	if err := other.Unlock(ctxT(t), session.Running); err != nil {
		t.Fatal(err)
	}
	d.must(t, r, adapters.OpCreate)
}

// TestOneTransactionPerDevice: resources of one device deployed at once
// go in one commit; when one of them is refused, the others are
// committed one by one and the error lands on the refused one alone.
func TestOneTransactionPerDevice(t *testing.T) {
	srv := netconftest.Shared(t)
	d := newDeployer(t)
	deployAll := func(rs []adapters.Resource) []error {
		errs := make([]error, len(rs))
		var wg sync.WaitGroup
		for i, r := range rs {
			wg.Go(func() { _, _, errs[i] = d.run(t, r, false) })
		}
		wg.Wait()
		return errs
	}
	var rs []adapters.Resource
	for range 6 {
		rs = append(rs, iface(srv, ifName(), map[string]any{"description": "batch"}))
	}
	before := netconf.Commits()
	for i, err := range deployAll(rs) {
		if err != nil {
			t.Errorf("%s: %v", rs[i].ID, err)
		}
	}
	if n := netconf.Commits() - before; n != 1 {
		t.Errorf("%d commits for 6 interfaces of one device, want 1", n)
	}

	var mixed []adapters.Resource
	for i := range 4 {
		typ := "iana-if-type:ethernetCsmacd"
		if i == 2 {
			typ = "iana-if-type:noSuchType"
		}
		mixed = append(mixed, iface(srv, ifName(), map[string]any{"type": typ}))
	}
	errs := deployAll(mixed)
	for i, err := range errs {
		if (err != nil) != (i == 2) {
			t.Errorf("%s: %v, want an error for the refused one alone", mixed[i].ID, err)
		}
	}
}

// TestDeviceGoesAway: a device that dies in the middle of a batch makes
// its resources unavailable, not failed, and the next attempt dials a
// new session.
func TestDeviceGoesAway(t *testing.T) {
	srv := netconftest.Start(t)
	d := newDeployer(t)
	a := iface(srv, ifName(), nil)
	d.must(t, a, adapters.OpCreate)
	srv.Kill(t)
	_, _, err := d.run(t, iface(srv, ifName(), nil), false)
	if err == nil || adapters.ClassOf(err) != adapters.ClassUnavailable {
		t.Fatalf("with the device gone: %v (class %s), want unavailable", err, adapters.ClassOf(err))
	}
	t.Logf("device gone: %v", err)
	if !errors.Is(err, session.ErrUnreachable) {
		t.Errorf("error %v does not say the device is unreachable", err)
	}
	// The next attempt dials again, and finds no device either.
	_, _, err = d.run(t, a, false)
	if err == nil || adapters.ClassOf(err) != adapters.ClassUnavailable || !errors.Is(err, session.ErrUnreachable) {
		t.Errorf("the next attempt: %v (class %s), want unavailable", err, adapters.ClassOf(err))
	}
}

// TestConformance runs the conformance suite on one interface.
func TestConformance(t *testing.T) {
	srv := netconftest.Shared(t)
	name := ifName()
	other := direct(t, srv)
	conformance.Run(t, conformance.Case{
		Handler: netconf.Config{},
		Desired: iface(srv, name, map[string]any{"description": "one"}),
		Updated: iface(srv, name, map[string]any{"description": "two", "enabled": false}),
		Invalid: map[string]adapters.Resource{
			"config":    iface(srv, name, map[string]any{"bad key!": "x"}),
			"path":      withAttr(iface(srv, name, nil), "path", "interfaces/interface[name="+name+"]"),
			"operation": withAttr(iface(srv, name, nil), "operation", "upsert"),
		},
		Exists: func(t testing.TB) bool { return strings.Contains(running(t, other, name), name) },
	})
}

func withAttr(r adapters.Resource, k string, v any) adapters.Resource {
	r.Attributes = maps.Clone(r.Attributes)
	r.Attributes[k] = v
	return r
}

// TestSecretsStayOut: the device's credentials, given as secret
// references, appear in no diff, log line or error, a refused create's
// included.
func TestSecretsStayOut(t *testing.T) {
	srv := netconftest.Shared(t)
	d := newDeployer(t)
	key := string(srv.PrivateKey)
	r := iface(srv, ifName(), map[string]any{"type": "iana-if-type:noSuchType", "description": "has a secret"})
	r.Attributes["private_key"] = map[string]any{"secret": "env:INTEND_SECRET_KEY"}
	hc := adapters.NewContext(adapters.WithCache(d.cache), adapters.WithScope(d.scope),
		adapters.WithSecrets(&adapters.Secrets{LookupEnv: func(name string) (string, bool) { return key, name == "INTEND_SECRET_KEY" }}))
	defer hc.Close()
	keyLine := strings.Split(strings.TrimSpace(key), "\n")[1] // a line of the key's body
	for _, dryRun := range []bool{true, false} {
		out, err := adapters.Run(ctxT(t), d.h, hc, r, dryRun)
		if dryRun && err != nil {
			t.Fatal(err)
		}
		if !dryRun && err == nil {
			t.Fatal("the device accepted an unknown identity")
		}
		seen := fmt.Sprint(out.Diff, hc.Logs(), hc.Facts())
		if err != nil {
			seen += err.Error()
		}
		if strings.Contains(seen, keyLine) {
			t.Errorf("dry-run %v: the private key shows: %s", dryRun, seen)
		}
		for k := range out.Diff {
			if !strings.HasPrefix(k, "config/") {
				t.Errorf("dry-run %v: the diff names %s", dryRun, k)
			}
		}
	}
	if got := (netconf.Config{}).SensitiveAttributes(); !slices.Equal(got, []string{"password", "private_key"}) {
		t.Errorf("sensitive attributes %v", got)
	}
}

// TestReplaceRemovesWhatIsNotNamed: with operation replace, a leaf added
// behind intend's back is drift, and the update removes it; with merge
// it is left alone.
func TestReplaceRemovesWhatIsNotNamed(t *testing.T) {
	srv := netconftest.Shared(t)
	d := newDeployer(t)
	other := direct(t, srv)
	name := ifName()
	merge := iface(srv, name, nil)
	d.must(t, merge, adapters.OpCreate)
	if err := other.EditConfig(ctxT(t), session.Candidate, []byte(`<interfaces xmlns="urn:ietf:params:xml:ns:yang:ietf-interfaces"><interface><name>`+name+`</name><description>by hand</description></interface></interfaces>`), session.EditOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(ctxT(t), session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	d.must(t, merge, adapters.OpNone)
	replace := withAttr(merge, "operation", "replace")
	out := d.must(t, replace, adapters.OpUpdate)
	leaf := "config/ietf-interfaces:interfaces/interface[name=" + name + "]/description"
	if want := (adapters.Diff{leaf: {From: "by hand", To: nil}}); !equalDiff(out.Diff, want) {
		t.Errorf("replace: %v, want %v", out.Diff, want)
	}
	if got := running(t, other, name); strings.Contains(got, "by hand") {
		t.Errorf("after the replace, running holds %s", got)
	}
	d.must(t, replace, adapters.OpNone)
}

// TestRunningOnly: on a device without :candidate (netconfd with
// --target=running) the adapter edits running in place, never commits:
// create, no-op, update, delete of the list entry, a value the device
// refuses (an rpc-error, nothing left behind), and several resources at
// once with one of them refused.
func TestRunningOnly(t *testing.T) {
	srv := netconftest.StartWith(t, netconftest.Options{RunningOnly: true})
	d := newDeployer(t)
	other := direct(t, srv)
	if other.Has(":candidate") || !other.Has(":writable-running") {
		t.Fatalf("the device's capabilities %v, want :writable-running without :candidate", other.Capabilities())
	}
	before := netconf.Commits()
	name := ifName()
	r := iface(srv, name, map[string]any{"description": "in place"})
	d.must(t, r, adapters.OpCreate)
	if got := running(t, other, name); !strings.Contains(got, "in place") {
		t.Fatalf("after create, running holds %s", got)
	}
	d.must(t, r, adapters.OpNone)
	u := iface(srv, name, map[string]any{"description": "changed", "enabled": false})
	out := d.must(t, u, adapters.OpUpdate)
	leaf := "config/ietf-interfaces:interfaces/interface[name=" + name + "]/"
	if want := (adapters.Diff{leaf + "description": {From: "in place", To: "changed"}, leaf + "enabled": {From: nil, To: false}}); !equalDiff(out.Diff, want) {
		t.Errorf("update: %v, want %v", out.Diff, want)
	}
	if got := running(t, other, name); !strings.Contains(got, "changed") || !strings.Contains(got, "false") {
		t.Fatalf("after update, running holds %s", got)
	}
	d.must(t, u, adapters.OpNone)
	u.Purged = true
	d.must(t, u, adapters.OpDelete)
	if got := running(t, other, name); strings.Contains(got, name) {
		t.Fatalf("after delete, running holds %s", got)
	}
	d.must(t, u, adapters.OpNone)

	bad := ifName()
	_, _, err := d.run(t, iface(srv, bad, map[string]any{"type": "iana-if-type:noSuchType"}), false)
	var rpc session.RPCError
	if err == nil || adapters.ClassOf(err) != adapters.ClassPermanent || !errors.As(err, &rpc) {
		t.Fatalf("a refused value on running: %v (class %s), want a permanent rpc-error", err, adapters.ClassOf(err))
	}
	if !strings.Contains(err.Error(), "edit-config running") {
		t.Errorf("error %q does not say it edited running", err)
	}
	if got := running(t, other, bad); strings.Contains(got, bad) {
		t.Errorf("the refused interface is in running: %s", got)
	}

	// Several at once, one refused: the others land, the error on the
	// refused one alone.
	var rs []adapters.Resource
	for i := range 4 {
		typ := "iana-if-type:ethernetCsmacd"
		if i == 1 {
			typ = "iana-if-type:noSuchType"
		}
		rs = append(rs, iface(srv, ifName(), map[string]any{"type": typ}))
	}
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() { _, _, errs[i] = d.run(t, r, false) })
	}
	wg.Wait()
	for i, err := range errs {
		if (err != nil) != (i == 1) {
			t.Errorf("%s: %v, want an error for the refused one alone", rs[i].ID, err)
		}
		name := rs[i].Attributes["path"].(string)
		name = name[strings.Index(name, "=")+1 : len(name)-1]
		if got := running(t, other, name); strings.Contains(got, name) != (i != 1) {
			t.Errorf("%s in running: %v, want %v", name, strings.Contains(got, name), i != 1)
		}
	}
	if n := netconf.Commits() - before; n != 0 {
		t.Errorf("%d commits on a device without :candidate, want none", n)
	}
}

// TestInterfaceAddress: ietf-ip's ipv4 addresses of an interface (a list
// keyed by ip) are created, compared per leaf, changed and removed, on
// netconfd with ietf-ip loaded from its YANG file.
func TestInterfaceAddress(t *testing.T) {
	srv := netconftest.Shared(t)
	d := newDeployer(t)
	other := direct(t, srv)
	name := ifName()
	addrs := func(a ...map[string]any) map[string]any {
		l := []any{}
		for _, x := range a {
			l = append(l, x)
		}
		return map[string]any{"ietf-ip:ipv4": map[string]any{"address": l}}
	}
	r := withAttr(iface(srv, name, addrs(map[string]any{"ip": "192.0.2.1", "prefix-length": 24})), "operation", "replace")
	out := d.must(t, r, adapters.OpCreate)
	leaf := "config/ietf-interfaces:interfaces/interface[name=" + name + "]/ietf-ip:ipv4/address[ip=192.0.2.1]/prefix-length"
	if c, ok := out.Diff[leaf]; !ok || fmt.Sprint(c.To) != "24" {
		t.Errorf("create: %v, want %s to 24", out.Diff, leaf)
	}
	if got := running(t, other, name); !strings.Contains(got, "192.0.2.1") || !strings.Contains(got, "<prefix-length>24</prefix-length>") {
		t.Fatalf("after create, running holds %s", got)
	}
	d.must(t, r, adapters.OpNone)

	// A second address, and the first's prefix changed: one leaf each.
	u := withAttr(iface(srv, name, addrs(map[string]any{"ip": "192.0.2.1", "prefix-length": 25},
		map[string]any{"ip": "198.51.100.7", "prefix-length": 32})), "operation", "replace")
	out = d.must(t, u, adapters.OpUpdate)
	second := "config/ietf-interfaces:interfaces/interface[name=" + name + "]/ietf-ip:ipv4/address[ip=198.51.100.7]/"
	if want := (adapters.Diff{leaf: {From: "24", To: 25}, second + "ip": {From: nil, To: "198.51.100.7"},
		second + "prefix-length": {From: nil, To: 32}}); !equalDiff(out.Diff, want) {
		t.Errorf("update: %v, want %v", out.Diff, want)
	}
	d.must(t, u, adapters.OpNone)

	// The first address dropped from config: replace removes it.
	v := withAttr(iface(srv, name, addrs(map[string]any{"ip": "198.51.100.7", "prefix-length": 32})), "operation", "replace")
	d.must(t, v, adapters.OpUpdate)
	if got := running(t, other, name); strings.Contains(got, "192.0.2.1") || !strings.Contains(got, "198.51.100.7") {
		t.Fatalf("after the replace, running holds %s", got)
	}
	d.must(t, v, adapters.OpNone)

	// An address that is no IPv4 address is the device's rpc-error.
	_, _, err := d.run(t, iface(srv, ifName(), addrs(map[string]any{"ip": "192.0.2.300", "prefix-length": 24})), false)
	var rpc session.RPCError
	if err == nil || !errors.As(err, &rpc) {
		t.Errorf("a bad address: %v, want the device's rpc-error", err)
	}
	t.Logf("bad address: %v", err)
}

// has reports whether the datastore ds holds the interface name.
func has(t testing.TB, s *session.Session, ds session.Datastore, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data, err := s.GetConfig(ctx, ds, []byte(`<interfaces xmlns="urn:ietf:params:xml:ns:yang:ietf-interfaces"><interface><name>`+name+`</name></interface></interfaces>`))
	if err != nil {
		t.Fatalf("get-config %s: %v", ds, err)
	}
	return strings.Contains(string(data), "<name>"+name+"</name>")
}

// deployAt deploys rs at once, as an executor's batch, and returns their
// errors.
func (d *deployer) deployAt(t *testing.T, rs []adapters.Resource) []error {
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() { _, _, errs[i] = d.run(t, r, false) })
	}
	wg.Wait()
	return errs
}

func ifNameOf(r adapters.Resource) string {
	p := r.Attributes["path"].(string)
	return p[strings.Index(p, "=")+1 : len(p)-1]
}

// TestDeviceGoesAwayInTransaction: the device goes away inside the group
// commit of several resources, after their edits and before the commit
// (netconfd killed, or the SSH connection cut). Every resource is
// unavailable, not failed; nothing was committed; the next attempt finds
// the candidate clean (a part of the batch deployed alone commits that
// part alone) and the one after converges.
func TestDeviceGoesAwayInTransaction(t *testing.T) {
	for _, how := range []string{"netconfd killed", "connection cut"} {
		t.Run(how, func(t *testing.T) {
			srv := netconftest.Start(t)
			d := newDeployer(t)
			var rs []adapters.Resource
			for range 4 {
				rs = append(rs, iface(srv, ifName(), map[string]any{"description": "in flight"}))
			}
			var once sync.Once
			hits := 0
			netconf.SetHook(t, func(point string) {
				if point != "commit" {
					return
				}
				once.Do(func() {
					hits++
					if how == "netconfd killed" {
						srv.Kill(t)
					} else if srv.SSH.KillConnections(t) == 0 {
						t.Error("no connection to cut")
					}
				})
			})
			before := netconf.Commits()
			for i, err := range d.deployAt(t, rs) {
				if err == nil || adapters.ClassOf(err) != adapters.ClassUnavailable {
					t.Errorf("%s: %v (class %s), want unavailable", rs[i].ID, err, adapters.ClassOf(err))
				}
			}
			if hits != 1 || netconf.Commits() != before {
				t.Fatalf("the hook ran %d times, %d commits: want the batch cut before its one commit", hits, netconf.Commits()-before)
			}
			if how == "netconfd killed" {
				// The device is still gone: unavailable again.
				if _, _, err := d.run(t, rs[0], false); adapters.ClassOf(err) != adapters.ClassUnavailable {
					t.Fatalf("with netconfd still dead: %v (class %s), want unavailable", err, adapters.ClassOf(err))
				}
				srv.Restart(t)
			}
			other := direct(t, srv)
			dirty := 0
			for _, r := range rs {
				if has(t, other, session.Running, ifNameOf(r)) {
					t.Errorf("%s is in running though its commit never came", ifNameOf(r))
				}
				if has(t, other, session.Candidate, ifNameOf(r)) {
					dirty++
				}
			}
			t.Logf("after the device went away, the candidate holds %d of the batch's %d edits", dirty, len(rs))
			if dirty == 0 {
				// netconfd discards the candidate of a session that
				// ends (or restarts from startup); a device that keeps
				// the lost edits is made by writing them there again.
				for _, r := range rs[2:] {
					if err := other.EditConfig(ctxT(t), session.Candidate, []byte(`<interfaces xmlns="urn:ietf:params:xml:ns:yang:ietf-interfaces"><interface><name>`+ifNameOf(r)+`</name><type xmlns:ianaift="urn:ietf:params:xml:ns:yang:iana-if-type">ianaift:ethernetCsmacd</type></interface></interfaces>`), session.EditOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}

			// The next attempt of half the batch: those commit, and
			// nothing the lost transaction left in the candidate with
			// them (the transaction discards it first).
			for i, err := range d.deployAt(t, rs[:2]) {
				if err != nil {
					t.Errorf("the next attempt: %s: %v", rs[i].ID, err)
				}
			}
			for i, r := range rs {
				if got := has(t, other, session.Running, ifNameOf(r)); got != (i < 2) {
					t.Errorf("after the next attempt of the first two, %s in running: %v", ifNameOf(r), got)
				}
			}
			for i, err := range d.deployAt(t, rs) {
				if err != nil {
					t.Errorf("the later attempt: %s: %v", rs[i].ID, err)
				}
			}
			for _, r := range rs {
				d.must(t, r, adapters.OpNone)
				if !has(t, other, session.Running, ifNameOf(r)) {
					t.Errorf("%s is not in running after the later attempt", ifNameOf(r))
				}
			}
		})
	}
}

// TestUnconfirmedCommitRollsBack: the adapter's session ends after its
// confirmed commit and before the confirmation (as when its process
// dies): the device rolls the change back by itself, the resource is
// unavailable, and a later attempt converges and stays.
func TestUnconfirmedCommitRollsBack(t *testing.T) {
	srv := netconftest.Start(t)
	d := newDeployer(t)
	name := ifName()
	r := withAttr(iface(srv, name, map[string]any{"description": "unconfirmed"}), "confirm_timeout", 2)
	cut := false
	netconf.SetHook(t, func(point string) {
		if point != "confirm" || cut {
			return
		}
		cut = true
		if s := direct(t, srv); !has(t, s, session.Running, name) {
			t.Error("the confirmed commit is not in running")
		}
		if srv.SSH.KillConnections(t) == 0 {
			t.Error("no connection to cut")
		}
	})
	_, _, err := d.run(t, r, false)
	if !cut || err == nil || adapters.ClassOf(err) != adapters.ClassUnavailable {
		t.Fatalf("the confirmation cut off: %v (class %s), want unavailable", err, adapters.ClassOf(err))
	}
	// netconfd checks a confirmed commit's timeout only when idle: ask
	// slowly.
	other := direct(t, srv)
	deadline := time.Now().Add(20 * time.Second)
	for has(t, other, session.Running, name) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still in running 20s after its unconfirmed commit of 2s\n%s", name, srv.Log())
		}
		time.Sleep(1500 * time.Millisecond)
	}
	d.must(t, r, adapters.OpCreate)
	time.Sleep(3 * time.Second) // past the timeout: confirmed, it stays
	if !has(t, other, session.Running, name) {
		t.Fatalf("%s rolled back though its commit was confirmed", name)
	}
	d.must(t, r, adapters.OpNone)
}
