package pythonplugin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	pb "github.com/intendhq/intend/adapters/plugin/adapterv1"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/pluginhost"
	"github.com/intendhq/intend/internal/pythonplugin"
	"github.com/intendhq/intend/internal/testenv/wait"
)

var (
	buildOnce       sync.Once
	iniPyz, testPyz string
	buildDir        string
)

// builds makes the zipapps once per test binary (in a directory removed
// by TestMain).
func builds(t *testing.T) (ini, test string) {
	t.Helper()
	buildOnce.Do(func() {
		bt := &onceT{T: t}
		iniPyz = pythonplugin.Build(bt, pythonplugin.INI())
		testPyz = pythonplugin.Build(bt, filepath.Join(pythonplugin.Root(), "adapters", "plugin", "python", "tests", "testplugin"))
	})
	if iniPyz == "" {
		t.Fatal("building the zipapps failed (see the first test that tried)")
	}
	return iniPyz, testPyz
}

// onceT gives Build a TempDir that outlives the first test using it.
type onceT struct{ *testing.T }

func (o *onceT) TempDir() string {
	if buildDir == "" {
		d, err := os.MkdirTemp("", "pyz")
		if err != nil {
			o.Fatal(err)
		}
		buildDir = d
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

type session struct {
	t      *testing.T
	stream pb.Adapter_SessionClient
	msgs   int
	cancel context.CancelFunc
}

func newSession(t *testing.T, p *pythonplugin.Plugin) *session {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := pb.NewAdapterClient(p.Conn).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &session{t: t, stream: st, cancel: cancel}
}

func (s *session) send(m *pb.HostMessage) {
	s.t.Helper()
	if err := s.stream.Send(m); err != nil {
		s.t.Fatal(err)
	}
}

// recv returns the next n replies by id.
func (s *session) recv(n int) map[uint64]*pb.Reply {
	s.t.Helper()
	out := map[uint64]*pb.Reply{}
	for len(out) < n {
		m, err := s.stream.Recv()
		if err != nil {
			s.t.Fatalf("after %d of %d replies: %v", len(out), n, err)
		}
		s.msgs++
		for _, r := range m.Replies {
			if _, dup := out[r.Id]; dup {
				s.t.Fatalf("call %d answered twice", r.Id)
			}
			out[r.Id] = r
		}
	}
	if len(out) != n {
		s.t.Fatalf("%d replies, want %d", len(out), n)
	}
	return out
}

// call sends one call and returns its reply.
func (s *session) call(c *pb.Call) *pb.Reply {
	s.t.Helper()
	s.send(&pb.HostMessage{Calls: []*pb.Call{c}})
	r := s.recv(1)[c.Id]
	if r == nil {
		s.t.Fatalf("no reply to call %d", c.Id)
	}
	return r
}

func res(t *testing.T, id string, attrs map[string]any) *pb.Resource {
	t.Helper()
	b, err := json.Marshal(attrs)
	if err != nil {
		t.Fatal(err)
	}
	return &pb.Resource{Id: id, AttributesJson: b}
}

func ok(t *testing.T, what string, r *pb.Reply) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("%s: %s: %s", what, r.Error.Class, r.Error.Message)
	}
}

func TestHandshakeHealthDescribe(t *testing.T) {
	ini, _ := builds(t)
	p := pythonplugin.Start(t, ini)
	t.Logf("handshake after %v", p.Started)
	if fi, err := os.Stat(p.Socket); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("socket %s: %v, %v; want a socket of its user only", p.Socket, fi, err)
	}
	ctx := context.Background()
	h, err := grpc_health_v1.NewHealthClient(p.Conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "plugin"})
	if err != nil || h.Status != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("health of service plugin: %v, %v; want SERVING", h, err)
	}
	if _, err := grpc_health_v1.NewHealthClient(p.Conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "other"}); err == nil {
		t.Fatal("health of an unknown service: no error")
	}
	d, err := pb.NewAdapterClient(p.Conn).Describe(ctx, &pb.DescribeRequest{ProtocolVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d.ProtocolVersion != 1 || d.Name != "ini" || len(d.Types) != 1 {
		t.Fatalf("describe: %v", d)
	}
	ty := d.Types[0]
	if ty.Name != "ini::Option" || ty.IdAttribute != "option" || !slices.Equal(ty.Capabilities, []string{"validate", "facts"}) {
		t.Fatalf("describe: type %v, want ini::Option, id attribute option, capabilities validate and facts", ty)
	}
}

func TestDescribeCapabilitiesAndSensitive(t *testing.T) {
	_, test := builds(t)
	p := pythonplugin.Start(t, test)
	d, err := pb.NewAdapterClient(p.Conn).Describe(context.Background(), &pb.DescribeRequest{ProtocolVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	var log *pb.TypeInfo
	for _, ty := range d.Types {
		if ty.Name == "test::Log" {
			log = ty
		} else if len(ty.Capabilities) != 0 {
			t.Errorf("%s: capabilities %v, want none (it overrides no optional method)", ty.Name, ty.Capabilities)
		}
	}
	if log == nil || !slices.Equal(log.Capabilities, []string{"diff"}) ||
		!slices.Equal(log.SensitiveAttributes, []string{"password"}) || !slices.Equal(log.SensitiveDiffAttributes, []string{"content"}) {
		t.Fatalf("test::Log: %v", log)
	}
}

func TestWithoutCookieRefuses(t *testing.T) {
	ini, _ := builds(t)
	cmd := exec.Command(pythonplugin.Python, ini)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "INTEND_PLUGIN_MAGIC_COOKIE=") })
	out, err := cmd.CombinedOutput()
	if ee, isExit := err.(*exec.ExitError); !isExit || ee.ExitCode() != 1 || !strings.Contains(string(out), "intend adapter plugin") {
		t.Fatalf("run by hand: %v\n%s\nwant exit 1 and a message naming an intend adapter plugin", err, out)
	}
}

func TestINILifecycle(t *testing.T) {
	ini, _ := builds(t)
	p := pythonplugin.Start(t, ini)
	s := newSession(t, p)
	path := filepath.Join(t.TempDir(), "app.ini")
	orig := "[other]\nkeep = me\n\n[server]\nHost = example.org\n"
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	attrs := map[string]any{"path": path, "section": "server", "key": "port", "value": "8080", "option": path + "[server]port"}
	id := "ini::Option[localhost,option=" + path + "[server]port]"
	var n uint64
	call := func(op pb.Op, a map[string]any, diff string) *pb.Reply {
		n++
		c := &pb.Call{Id: n, Op: op, Resource: res(t, id, a)}
		if diff != "" {
			c.DiffJson = []byte(diff)
		}
		return s.call(c)
	}
	observe := func(wantExists bool, wantValue string) {
		t.Helper()
		r := call(pb.Op_OP_OBSERVE, attrs, "")
		ok(t, "observe", r)
		if r.Exists != wantExists {
			t.Fatalf("observe: exists %v, want %v", r.Exists, wantExists)
		}
		if !wantExists {
			return
		}
		var got map[string]any
		if err := json.Unmarshal(r.AttributesJson, &got); err != nil {
			t.Fatal(err)
		}
		if got["value"] != wantValue || got["key"] != "port" || got["section"] != "server" {
			t.Fatalf("observe: %v, want value %q", got, wantValue)
		}
	}

	ok(t, "validate", call(pb.Op_OP_VALIDATE, attrs, ""))
	observe(false, "")
	r := call(pb.Op_OP_CREATE, attrs, "")
	ok(t, "create", r)
	if r.Changed != nil {
		t.Errorf("create: changed %v, want unset (the engine decides)", *r.Changed)
	}
	if len(r.Logs) != 1 || r.Logs[0].Level != "INFO" || r.Logs[0].Msg != "set" {
		t.Errorf("create: logs %v, want one INFO line \"set\"", r.Logs)
	}
	observe(true, "8080")

	attrs["value"] = "9090"
	ok(t, "update", call(pb.Op_OP_UPDATE, attrs, `{"value":{"from":"8080","to":"9090"}}`))
	observe(true, "9090")
	b, _ := os.ReadFile(path)
	if want := "[other]\nkeep = me\n\n[server]\nHost = example.org\nport = 9090\n\n"; string(b) != want {
		t.Fatalf("file after update:\n%s\nwant:\n%s", b, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after update %v, want 0600 kept", fi.Mode().Perm())
	}

	r = call(pb.Op_OP_FACTS, attrs, "")
	ok(t, "facts", r)
	if string(r.FactsJson) != `{"section_options":2}` {
		t.Fatalf("facts: %s, want section_options 2", r.FactsJson)
	}

	ok(t, "delete", call(pb.Op_OP_DELETE, attrs, ""))
	observe(false, "")
	if b, _ := os.ReadFile(path); strings.Contains(string(b), "port") || !strings.Contains(string(b), "keep = me") {
		t.Fatalf("file after delete:\n%s", b)
	}
	r = call(pb.Op_OP_DELETE, attrs, "")
	ok(t, "delete again", r)
	if r.Changed == nil || *r.Changed {
		t.Fatalf("delete of an absent option: changed %v, want false", r.Changed)
	}

	// A new file in a missing directory: permanent, naming path.
	a2 := map[string]any{"path": filepath.Join(t.TempDir(), "no", "x.ini"), "section": "s", "key": "k", "value": "v"}
	r = call(pb.Op_OP_CREATE, a2, "")
	if r.Error == nil || r.Error.Class != pb.Class_CLASS_PERMANENT || !strings.HasPrefix(r.Error.Message, "path: ") {
		t.Fatalf("create in a missing directory: %v, want a permanent error naming path", r.Error)
	}
}

func TestINIValidateRefusesNewline(t *testing.T) {
	ini, _ := builds(t)
	p := pythonplugin.Start(t, ini)
	s := newSession(t, p)
	path := filepath.Join(t.TempDir(), "app.ini")
	for i, tc := range []struct{ attr, value string }{
		{"value", "a\nb"}, {"value", "a\rb"}, {"section", "s\nt"}, {"key", "k\n"}, {"key", "a=b"}, {"path", "rel.ini"},
	} {
		a := map[string]any{"path": path, "section": "s", "key": "k", "value": "v"}
		a[tc.attr] = tc.value
		r := s.call(&pb.Call{Id: uint64(i + 1), Op: pb.Op_OP_VALIDATE, Resource: res(t, "ini::Option[localhost,option=x]", a)})
		if r.Error == nil || r.Error.Class != pb.Class_CLASS_PERMANENT || !strings.HasPrefix(r.Error.Message, tc.attr+": ") {
			t.Errorf("%s %q: %v, want a permanent error naming %s", tc.attr, tc.value, r.Error, tc.attr)
		}
	}
}

// TestBatch sends 100 calls in one message: every one is answered once,
// in fewer messages than calls.
func TestBatch(t *testing.T) {
	ini, _ := builds(t)
	p := pythonplugin.Start(t, ini)
	s := newSession(t, p)
	dir := t.TempDir()
	m := &pb.HostMessage{}
	for i := range 100 {
		path := filepath.Join(dir, fmt.Sprintf("f%d.ini", i%10))
		a := map[string]any{"path": path, "section": "s", "key": fmt.Sprintf("k%d", i), "value": fmt.Sprint(i)}
		m.Calls = append(m.Calls, &pb.Call{Id: uint64(i + 1), Op: pb.Op_OP_CREATE, Resource: res(t, fmt.Sprintf("ini::Option[localhost,option=%d]", i), a)})
	}
	s.send(m)
	replies := s.recv(100)
	for id, r := range replies {
		ok(t, fmt.Sprint("create ", id), r)
	}
	t.Logf("100 creates answered in %d messages", s.msgs)
	// Ten calls per file ran concurrently: none was lost (the adapter
	// serialises a file's read-modify-write).
	for f := range 10 {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%d.ini", f)))
		if got := strings.Count(string(b), " = "); got != 10 {
			t.Errorf("f%d.ini has %d options, want 10:\n%s", f, got, b)
		}
	}
}

// TestBatchCoalesced: replies that are ready together go in one message.
// 100 calls that do nothing finish faster than their replies are
// written, so they take far fewer messages than calls.
func TestBatchCoalesced(t *testing.T) {
	_, test := builds(t)
	p := pythonplugin.Start(t, test)
	s := newSession(t, p)
	for round := range 3 {
		m := &pb.HostMessage{}
		for i := range 100 {
			m.Calls = append(m.Calls, &pb.Call{Id: uint64(round*100 + i + 1), Op: pb.Op_OP_OBSERVE,
				Resource: res(t, fmt.Sprintf("test::Noop[localhost,k=%d]", i), map[string]any{})})
		}
		s.msgs = 0
		s.send(m)
		for id, r := range s.recv(100) {
			ok(t, fmt.Sprint("observe ", id), r)
		}
		t.Logf("100 observes answered in %d messages", s.msgs)
		if s.msgs > 50 {
			t.Errorf("100 replies in %d messages: hardly coalesced", s.msgs)
		}
	}
}

// TestLargeReplies: replies that are ready together go in messages of at
// most 1 MiB (a larger reply alone), so that a batch of large
// observations never passes the host's 4 MiB limit together.
func TestLargeReplies(t *testing.T) {
	_, test := builds(t)
	p := pythonplugin.Start(t, test)
	st, err := pb.NewAdapterClient(p.Conn).Session(t.Context()) // grpc-go's default limit: 4 MiB a message
	if err != nil {
		t.Fatal(err)
	}
	m := &pb.HostMessage{}
	for i := range 30 {
		size := 300 << 10
		if i == 7 {
			size = 2 << 20
		}
		m.Calls = append(m.Calls, &pb.Call{Id: uint64(i + 1), Op: pb.Op_OP_OBSERVE,
			Resource: res(t, fmt.Sprintf("test::Big[localhost,k=%d]", i), map[string]any{"size": size})})
	}
	if err := st.Send(m); err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 30 {
		pm, err := st.Recv()
		if err != nil {
			t.Fatalf("after %d of 30 replies: %v", got, err)
		}
		if n := proto.Size(pm); n > 1<<20+1024 && len(pm.Replies) > 1 {
			t.Errorf("a message of %d bytes with %d replies, want at most 1 MiB or one reply", n, len(pm.Replies))
		}
		for _, r := range pm.Replies {
			ok(t, fmt.Sprint("observe ", r.Id), r)
		}
		got += len(pm.Replies)
	}
}

func TestCancelAndDeadline(t *testing.T) {
	_, test := builds(t)
	p := pythonplugin.Start(t, test)
	s := newSession(t, p)
	r := res(t, "test::Sleep[localhost,k=1]", map[string]any{})
	s.send(&pb.HostMessage{Calls: []*pb.Call{{Id: 1, Op: pb.Op_OP_OBSERVE, Resource: r}}})
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	s.send(&pb.HostMessage{Cancel: []uint64{1}})
	got := s.recv(1)[1]
	if got.Error == nil || got.Error.Class != pb.Class_CLASS_TRANSIENT || !strings.HasPrefix(got.Error.Message, "cancelled after") {
		t.Fatalf("cancelled call: %v, want the handler to see ctx.cancelled()", got.Error)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancelled call answered after %v", d)
	}

	deadline := time.Now().Add(300 * time.Millisecond)
	got = s.call(&pb.Call{Id: 2, Op: pb.Op_OP_OBSERVE, Resource: r, DeadlineUnixNano: deadline.UnixNano()})
	if got.Error == nil || !strings.HasPrefix(got.Error.Message, "cancelled after") || time.Now().Before(deadline) {
		t.Fatalf("call past its deadline: %v", got.Error)
	}

	// A call whose deadline passed before it started is not run.
	got = s.call(&pb.Call{Id: 3, Op: pb.Op_OP_OBSERVE, Resource: r, DeadlineUnixNano: time.Now().Add(-time.Second).UnixNano()})
	if got.Error == nil || got.Error.Class != pb.Class_CLASS_TRANSIENT || !strings.Contains(got.Error.Message, "before it started") {
		t.Fatalf("call past its deadline before it started: %v", got.Error)
	}
}

func TestErrors(t *testing.T) {
	_, test := builds(t)
	p := pythonplugin.Start(t, test)
	s := newSession(t, p)
	boom := res(t, "test::Boom[localhost,k=1]", map[string]any{})
	r := s.call(&pb.Call{Id: 1, Op: pb.Op_OP_OBSERVE, Resource: boom})
	if r.Error == nil || r.Error.Class != pb.Class_CLASS_PERMANENT || r.Error.Message != "ValueError: boom in test::Boom[localhost,k=1]" {
		t.Fatalf("exception: %v, want permanent \"ValueError: boom in …\"", r.Error)
	}
	r = s.call(&pb.Call{Id: 2, Op: pb.Op_OP_CREATE, Resource: boom})
	if r.Error == nil || r.Error.Class != pb.Class_CLASS_PERMANENT || r.Error.Message != "SystemExit: 3" {
		t.Fatalf("SystemExit: %v, want permanent \"SystemExit: 3\"", r.Error)
	}
	if !strings.Contains(p.Stderr(), "Traceback") {
		t.Errorf("no traceback in the plugin's log:\n%s", p.Stderr())
	}
	th := res(t, "test::Throttle[localhost,k=1]", map[string]any{})
	r = s.call(&pb.Call{Id: 3, Op: pb.Op_OP_OBSERVE, Resource: th})
	if r.Error == nil || r.Error.Class != pb.Class_CLASS_THROTTLED || r.Error.RetryAfterMs != 2500 || r.Error.Message != "slow down" {
		t.Fatalf("throttled: %v", r.Error)
	}
	r = s.call(&pb.Call{Id: 4, Op: pb.Op_OP_CREATE, Resource: th})
	if r.Error == nil || r.Error.Class != pb.Class_CLASS_SKIPPED || r.Error.RetryAfterMs != 1000 {
		t.Fatalf("skipped: %v", r.Error)
	}
	r = s.call(&pb.Call{Id: 5, Op: pb.Op_OP_OBSERVE, Resource: res(t, "nope::X[localhost,k=1]", map[string]any{})})
	if r.Error == nil || r.Error.Class != pb.Class_CLASS_PERMANENT || !strings.Contains(r.Error.Message, "serves no type") {
		t.Fatalf("unknown type: %v", r.Error)
	}
	// The plugin is alive after all that.
	r = s.call(&pb.Call{Id: 6, Op: pb.Op_OP_OBSERVE, Resource: boom})
	if r.Error == nil {
		t.Fatal("no reply after the exceptions")
	}
}

func TestLogsFactsChangedDiff(t *testing.T) {
	_, test := builds(t)
	p := pythonplugin.Start(t, test)
	s := newSession(t, p)
	lr := res(t, "test::Log[localhost,k=1]", map[string]any{"where": "here"})
	r := s.call(&pb.Call{Id: 1, Op: pb.Op_OP_OBSERVE, Resource: lr, Scope: &pb.Scope{Environment: "dev", Version: 7}, Event: true})
	ok(t, "observe", r)
	var levels []string
	for _, l := range r.Logs {
		levels = append(levels, l.Level)
		if l.TimeUnixNano == 0 {
			t.Errorf("line %q without a time", l.Msg)
		}
	}
	if !slices.Equal(levels, []string{"DEBUG", "INFO", "WARN", "ERROR", "WARN"}) {
		t.Fatalf("levels %v", levels)
	}
	if debug := string(r.Logs[0].AttrsJson); debug != `{"n":1,"nan":"nan"}` {
		t.Errorf("debug line's attributes %s: NaN, which JSON has not, as its str", debug)
	}
	info := r.Logs[1]
	if info.Msg != "found" || string(info.AttrsJson) != `{"where":"here","out":"s3cret"}` || !slices.Equal(info.SensitiveOutputs, []string{"out"}) {
		t.Fatalf("info line: %v", info)
	}
	if last := r.Logs[4]; last.Msg != "fact dropped: its value is not JSON" {
		t.Fatalf("last line %v, want the dropped fact's warning", last)
	}
	if string(r.FactsJson) != `{"size":42}` {
		t.Fatalf("facts %s", r.FactsJson)
	}
	if string(r.AttributesJson) != `{"where":"here","scope":["dev",7],"event":true}` {
		t.Fatalf("attributes %s: the context's scope and event", r.AttributesJson)
	}
	r = s.call(&pb.Call{Id: 2, Op: pb.Op_OP_DELETE, Resource: lr})
	ok(t, "delete", r)
	if r.Changed == nil || *r.Changed {
		t.Fatalf("changed %v, want false", r.Changed)
	}
	r = s.call(&pb.Call{Id: 3, Op: pb.Op_OP_DIFF, Resource: lr, ObservedJson: []byte(`{"exists":true,"attributes":{"where":"there"}}`)})
	ok(t, "diff", r)
	if string(r.DiffJson) != `{"where/x":{"from":"there","to":"here"}}` {
		t.Fatalf("diff %s", r.DiffJson)
	}
	// print() goes to the log, never to stdout (the protocol's).
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if out := p.Stdout(); out != "" {
		t.Errorf("stdout after the handshake: %q, want nothing", out)
	}
	if !strings.Contains(p.Stderr(), "printed by the adapter") {
		t.Errorf("the adapter's print() is not in the plugin's log:\n%s", p.Stderr())
	}
}

// TestCacheExpire: values cached for a version are shared by its calls
// and closed when Expire no longer lists the version's scope.
func TestCacheExpire(t *testing.T) {
	_, test := builds(t)
	p := pythonplugin.Start(t, test)
	s := newSession(t, p)
	closed := filepath.Join(t.TempDir(), "closed")
	fill := func(id uint64, version int64) string {
		r := s.call(&pb.Call{Id: id, Op: pb.Op_OP_OBSERVE, Resource: res(t, "test::Cached[localhost,k=1]", map[string]any{"key": "a", "closed": closed}),
			Scope: &pb.Scope{Environment: "dev", Version: version}})
		ok(t, "observe", r)
		return string(r.AttributesJson)
	}
	if a, b := fill(1, 7), fill(2, 7); a != `{"fill":1}` || b != a {
		t.Fatalf("version 7: %s then %s, want one fill shared", a, b)
	}
	if c := fill(3, 8); c != `{"fill":2}` {
		t.Fatalf("version 8: %s, want a fill of its own", c)
	}
	ac := pb.NewAdapterClient(p.Conn)
	if _, err := ac.Expire(context.Background(), &pb.ExpireRequest{Open: []*pb.Scope{{Environment: "dev", Version: 8}}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(closed); string(b) != "1\n" {
		t.Fatalf("closed after the expiry of version 7: %q, want its value only", b)
	}
	if c := fill(4, 8); c != `{"fill":2}` {
		t.Fatalf("version 8 after the expiry of 7: %s, want its value kept", c)
	}
}

// TestSessionEnd: when the host closes its side, the plugin answers the
// calls in flight and ends the stream.
func TestSessionEnd(t *testing.T) {
	_, test := builds(t)
	p := pythonplugin.Start(t, test)
	s := newSession(t, p)
	r := res(t, "test::Sleep[localhost,k=1]", map[string]any{})
	s.send(&pb.HostMessage{Calls: []*pb.Call{{Id: 1, Op: pb.Op_OP_OBSERVE, Resource: r, DeadlineUnixNano: time.Now().Add(200 * time.Millisecond).UnixNano()}}})
	if err := s.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if got := s.recv(1)[1]; got == nil {
		t.Fatal("no reply")
	}
	t0 := time.Now()
	if _, err := s.stream.Recv(); err == nil {
		t.Fatal("the stream went on after the last reply")
	}
	t.Logf("end after %v", time.Since(t0))
}

func TestStopRemovesSocket(t *testing.T) {
	_, test := builds(t)
	for _, how := range []string{"SIGTERM", "Shutdown"} {
		t.Run(how, func(t *testing.T) {
			p := pythonplugin.Start(t, test)
			start := time.Now()
			if how == "SIGTERM" {
				if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			} else if err := p.Conn.Invoke(context.Background(), "/plugin.GRPCController/Shutdown", &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
				t.Fatal(err)
			}
			exited, err := p.Wait(10 * time.Second)
			if !exited || err != nil {
				t.Fatalf("after %s: exited %v, %v; want exit 0", how, exited, err)
			}
			t.Logf("exited %v after %s", time.Since(start), how)
			if _, err := os.Stat(p.Socket); !os.IsNotExist(err) {
				t.Fatalf("socket %s still there after %s: %v", p.Socket, how, err)
			}
		})
	}
}

// TestPythonUnit runs the SDK's and the ini adapter's Python unit tests
// with Debian's python3.
func TestPythonUnit(t *testing.T) {
	pythonplugin.Check(t)
	root := filepath.Join(pythonplugin.Root(), "adapters", "plugin", "python")
	cmd := exec.Command(pythonplugin.Python, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-v")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PYTHONPATH="+root+string(os.PathListSeparator)+filepath.Join(root, "examples", "ini"),
		"PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python unit tests: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "\nOK") {
		t.Fatalf("python unit tests: no OK:\n%s", out)
	}
	t.Logf("%s", out)
}

// iniModel compiles a model using the ini module's #Option (vendored
// under cue.mod/pkg as intend does) and returns its resources.
func iniModel(t *testing.T, resources string) ([]compiler.Resource, error) {
	t.Helper()
	dir := t.TempDir()
	def, err := os.ReadFile(filepath.Join(pythonplugin.INIModule(), "ini.cue"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"intend.yaml":                         "name: example\n",
		"main.cue":                            "package main\n\nimport \"example.com/ini\"\n\nresources: {\n" + resources + "\n}\n",
		"cue.mod/pkg/example.com/ini/ini.cue": string(def),
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := compiler.Compile(t.Context(), compiler.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	return res.Resources, nil
}

// TestINIModel: the CUE definition gives the id the adapter expects and
// refuses what the adapter's validate refuses.
func TestINIModel(t *testing.T) {
	rs, err := iniModel(t, `port: ini.#Option & {path: "/etc/app.ini", section: "server", key: "Port", value: "8080"}
gone: ini.#Option & {path: "/etc/app.ini", section: "server", key: "old", purged: true}`)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]compiler.Resource{}
	for _, r := range rs {
		ids[r.ID] = r
	}
	port, found := ids["ini::Option[localhost,option=/etc/app.ini[server]Port]"]
	if !found || len(rs) != 2 {
		t.Fatalf("ids %v", slices.Collect(maps.Keys(ids)))
	}
	id, err := resource.Parse(port.ID)
	if err != nil || id.Attribute != "option" || id.Value != "/etc/app.ini[server]Port" {
		t.Fatalf("parse %s: %+v, %v", port.ID, id, err)
	}
	if v := string(port.Attributes["value"]); v != `"8080"` {
		t.Fatalf("value attribute %s", v)
	}
	for _, bad := range []string{
		`x: ini.#Option & {path: "/etc/app.ini", section: "s", key: "k", value: "a\nb"}`,
		`x: ini.#Option & {path: "/etc/app.ini", section: "s", key: "k"}`,
		`x: ini.#Option & {path: "etc/app.ini", section: "s", key: "k", value: "v"}`,
		`x: ini.#Option & {path: "/etc/app.ini", section: "s]", key: "k", value: "v"}`,
		`x: ini.#Option & {path: "/etc/app.ini", section: "s", key: "a=b", value: "v"}`,
		`x: ini.#Option & {path: "/etc/app.ini", section: "s", key: "k", value: " v"}`,
	} {
		if _, err := iniModel(t, bad); err == nil {
			t.Errorf("compiled: %s", bad)
		}
	}
}

// BenchmarkObserveUpdate measures a Python plugin's own CPU per resource
// for an observe and an update, in batches of 100 calls per HostMessage,
// and its start time to the handshake line: for ini::Option (100 options
// over 10 files) and for a type that does nothing (the SDK's own cost).
//
//	go test -run '^$' -bench ObserveUpdate -benchtime 20x ./internal/pythonplugin
func BenchmarkObserveUpdate(b *testing.B) {
	b.Run("ini", func(b *testing.B) { benchObserveUpdate(b, pythonplugin.INI(), "ini::Option") })
	b.Run("noop", func(b *testing.B) {
		benchObserveUpdate(b, filepath.Join(pythonplugin.Root(), "adapters", "plugin", "python", "tests", "testplugin"), "test::Noop")
	})
}

func benchObserveUpdate(b *testing.B, dir, typ string) {
	pyz := pythonplugin.Build(b, dir)
	var started time.Duration
	for range 5 {
		p := pythonplugin.Start(b, pyz)
		started += p.Started
	}
	p := pythonplugin.Start(b, pyz)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := pb.NewAdapterClient(p.Conn).Session(ctx)
	if err != nil {
		b.Fatal(err)
	}
	tmp := b.TempDir()
	const batch = 100
	rs := make([]*pb.Resource, batch)
	for i := range rs {
		a, _ := json.Marshal(map[string]any{"path": filepath.Join(tmp, fmt.Sprintf("f%d.ini", i%10)), "section": "s",
			"key": fmt.Sprintf("k%d", i), "value": "0"})
		rs[i] = &pb.Resource{Id: fmt.Sprintf("%s[localhost,option=%d]", typ, i), AttributesJson: a}
	}
	var id uint64
	round := func(op pb.Op, value int) {
		m := &pb.HostMessage{}
		for _, r := range rs {
			id++
			c := &pb.Call{Id: id, Op: op, Resource: r}
			if op == pb.Op_OP_UPDATE {
				var a map[string]any
				_ = json.Unmarshal(r.AttributesJson, &a)
				a["value"] = fmt.Sprint(value)
				c.Resource = &pb.Resource{Id: r.Id}
				c.Resource.AttributesJson, _ = json.Marshal(a)
				c.DiffJson = []byte(fmt.Sprintf(`{"value":{"from":"%d","to":"%d"}}`, value-1, value))
			}
			m.Calls = append(m.Calls, c)
		}
		if err := st.Send(m); err != nil {
			b.Fatal(err)
		}
		for n := 0; n < batch; {
			pm, err := st.Recv()
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range pm.Replies {
				if r.Error != nil {
					b.Fatalf("%s: %s", op, r.Error.Message)
				}
			}
			n += len(pm.Replies)
		}
	}
	round(pb.Op_OP_CREATE, 0)
	cpu0, err := p.CPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		round(pb.Op_OP_OBSERVE, 0)
		round(pb.Op_OP_UPDATE, i+1)
	}
	b.StopTimer()
	cpu1, _ := p.CPU()
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N*batch), "plugin-cpu-µs/resource")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "wall-µs/resource")
	b.ReportMetric(float64(started.Milliseconds())/5, "start-ms")
	b.ReportMetric(0, "ns/op")
}

// TestConformanceINI runs the conformance suite against the Python
// ini::Option through the host's proxy (pluginhost.NewClient), with the
// engine on the host, as an executor runs it.
func TestConformanceINI(t *testing.T) {
	ini, _ := builds(t)
	p := pythonplugin.Start(t, ini)
	c, err := pluginhost.NewClient(t.Context(), p.Conn, "ini")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(nil) })
	h, found := c.Handler("ini::Option")
	if !found {
		t.Fatalf("the plugin serves %v", c.Types())
	}
	path := filepath.Join(t.TempDir(), "app.ini")
	const others = "[other]\nkeep = me\n\n[server]\nhost = example.org\n\n"
	if err := os.WriteFile(path, []byte(others), 0o600); err != nil {
		t.Fatal(err)
	}
	option := func(attrs map[string]any) adapters.Resource {
		a := map[string]any{"path": path, "section": "server", "key": "port", "value": "8080"}
		maps.Copy(a, attrs)
		a["option"] = path + "[server]port"
		return adapters.Resource{ID: resource.ID{Type: "ini::Option", Agent: "localhost", Attribute: "option", Value: a["option"].(string)},
			Attributes: a}
	}
	conformance.Run(t, conformance.Case{
		Handler: h,
		Desired: option(nil),
		Updated: option(map[string]any{"value": "9090"}),
		Invalid: map[string]adapters.Resource{
			"value":   option(map[string]any{"value": "80\nevil = 1"}),
			"key":     option(map[string]any{"key": "port=1"}),
			"section": option(map[string]any{"section": "server]\n[x"}),
		},
		Exists: func(t testing.TB) bool {
			t.Helper()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return strings.Contains(string(b), "\nport = ")
		},
	})
	if b, err := os.ReadFile(path); err != nil || string(b) != others {
		t.Errorf("after the suite the file is %q (%v), want %q", b, err, others)
	}

	// Through the engine: the plugin's log lines and facts reach the
	// host's context.
	hc := adapters.NewContext()
	defer hc.Close()
	out, err := adapters.Run(t.Context(), h, hc, option(nil), false)
	if err != nil || out.Action != adapters.OpCreate {
		t.Fatalf("run: %v, %v", out, err)
	}
	if logs := hc.Logs(); len(logs) == 0 || logs[len(logs)-1].Message != "set" {
		t.Fatalf("logs %v, want the plugin's \"set\"", logs)
	}
	if f := hc.Facts(); fmt.Sprint(f["section_options"]) != "2" {
		t.Fatalf("facts %v, want section_options 2", f)
	}
}

// TestProxyErrors: an exception in a Python handler is a permanent error
// with its type and message on the host; a throttled one keeps its delay.
func TestProxyErrors(t *testing.T) {
	_, test := builds(t)
	p := pythonplugin.Start(t, test)
	c, err := pluginhost.NewClient(t.Context(), p.Conn, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(nil) })
	boom, _ := c.Handler("test::Boom")
	r := adapters.Resource{ID: resource.ID{Type: "test::Boom", Agent: "a", Attribute: "k", Value: "1"}, Attributes: map[string]any{}}
	_, err = boom.Observe(t.Context(), adapters.NewContext(), r)
	if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), "ValueError: boom in test::Boom[a,k=1]") {
		t.Fatalf("exception: %v (class %s)", err, adapters.ClassOf(err))
	}
	th, _ := c.Handler("test::Throttle")
	r.ID.Type = "test::Throttle"
	_, err = th.Observe(t.Context(), adapters.NewContext(), r)
	if adapters.ClassOf(err) != adapters.ClassThrottled || adapters.RetryAfterOf(err) != 2500*time.Millisecond {
		t.Fatalf("throttled: %v (class %s, after %v)", err, adapters.ClassOf(err), adapters.RetryAfterOf(err))
	}
}

// TestOrphanExits: a plugin whose host died without stopping it exits
// (and removes its socket) on its own.
func TestOrphanExits(t *testing.T) {
	_, test := builds(t)
	dir := t.TempDir()
	// The shell is the plugin's parent; it exits a second later.
	sh := exec.Command("/bin/sh", "-c", `"$0" -s "$1" & sleep 1`, pythonplugin.Python, test)
	sh.Env = []string{"PATH=/usr/bin:/bin", "INTEND_PLUGIN_MAGIC_COOKIE=intend-adapter-plugin-v1", "PLUGIN_UNIX_SOCKET_DIR=" + dir}
	stdout, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if err := sh.Wait(); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimSpace(line), "|")
	if len(parts) != 5 {
		t.Fatalf("handshake %q", line)
	}
	// The SDK names its socket plugin<pid>-…: kill it if the test fails.
	var pid int
	if _, err := fmt.Sscanf(filepath.Base(parts[3]), "plugin%d-", &pid); err != nil || pid <= 1 {
		t.Fatalf("socket name %s: %v", parts[3], err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	wait.For(t, "the orphaned plugin's socket "+parts[3]+" to go after its parent exited", 10*time.Second, func() error {
		_, err := os.Stat(parts[3])
		return wait.Unless(os.IsNotExist(err), "stat: %v", err)
	})
}

// TestStubsUpToDate: the committed Python stubs are what `make proto`
// generates from the protos now (Debian's protoc, 3.21, the version of
// the python3-protobuf runtime).
func TestStubsUpToDate(t *testing.T) {
	root := pythonplugin.Root()
	out := t.TempDir()
	for _, src := range []struct{ dir, file string }{
		{"adapters/plugin/adapterv1", "adapter.proto"},
		{"adapters/plugin/python/proto", "health.proto"},
	} {
		cmd := exec.Command("/usr/bin/protoc", "-I", filepath.Join(root, src.dir), "--python_out="+out, filepath.Join(root, src.dir, src.file))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("protoc (make plugintools installs it): %v\n%s", err, b)
		}
		name := strings.TrimSuffix(src.file, ".proto") + "_pb2.py"
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, "adapters", "plugin", "python", "intend_plugin", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("adapters/plugin/python/intend_plugin/%s is not what protoc makes of %s/%s: run make proto", name, src.dir, src.file)
		}
	}
}
