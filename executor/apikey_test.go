package executor_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/intendhq/intend/internal/temporalconn"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
)

// keyServer is a gRPC server over TLS standing in for Temporal: it answers
// every call Unauthenticated and records the authorization header each
// call carried. It is not Temporal: it checks what goes on the wire, not
// that a real Temporal accepts the key.
type keyServer struct {
	Addr string

	mu    sync.Mutex
	calls []string // method: authorization
}

func startKeyServer(t *testing.T, cert tls.Certificate) *keyServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &keyServer{Addr: ln.Addr().String()}
	s := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})),
		grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			method, _ := grpc.MethodFromServerStream(stream)
			md, _ := metadata.FromIncomingContext(stream.Context())
			k.mu.Lock()
			k.calls = append(k.calls, method+": "+strings.Join(md.Get("authorization"), ","))
			k.mu.Unlock()
			return status.Error(codes.Unauthenticated, "test server: the key is not checked here")
		}))
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return k
}

// Calls returns the calls received, as "method: authorization".
func (k *keyServer) Calls() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.calls...)
}

// TestAPIKeyOnTheWire: the API key set by INTEND_TEMPORAL_API_KEY (the
// executor) or by the server's config reaches Temporal as the bearer token
// of its calls, over TLS; without a key no authorization is sent. The fake
// server refuses the first call (GetSystemInfo, made when connecting), so
// this proves what the first call carries, not that Temporal Cloud accepts
// the key; the SDK adds the token to every call by the same interceptor.
func TestAPIKeyOnTheWire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, namespace := testenv.Temporal(t)
	ca := newCA(t, "key-ca")
	db := testenv.Database(t)

	cases := []struct {
		why  string
		env  map[string]string
		want string // authorization of the calls
	}{
		{"the variable's key is the bearer token", map[string]string{"INTEND_TEMPORAL_API_KEY": "s3cret"}, "Bearer s3cret"},
		{"no key, no authorization", nil, ""},
	}
	for _, c := range cases {
		fake := startKeyServer(t, ca.issue(t, "fake-temporal", true).TLS)
		out, err := runExecutor(t, c.env, "--environment", "e", "--agent", "a",
			"--server", "http://127.0.0.1:1", "--token", "intend_not-reached-Temporal-refuses-first",
			"--temporal-address", fake.Addr, "--temporal-namespace", namespace, "--temporal-tls-ca", ca.File)
		if err == nil || !strings.Contains(err.Error(), "Unauthenticated") {
			t.Errorf("%s: executor = %v, want the fake server's refusal\n%s", c.why, err, out)
		}
		calls := fake.Calls()
		t.Logf("%s: %v; calls %q", c.why, err, calls)
		if len(calls) == 0 {
			t.Errorf("%s: the fake server received no call", c.why)
		}
		for _, call := range calls {
			if _, auth, _ := strings.Cut(call, ": "); auth != c.want {
				t.Errorf("%s: call %q, want authorization %q", c.why, call, c.want)
			}
		}
		if c.want != "" && (!strings.Contains(err.Error(), "API key") || strings.Contains(err.Error(), "s3cret")) {
			t.Errorf("%s: the error should say an API key was sent, never the key: %v", c.why, err)
		}
	}

	// The server sends its key the same way.
	fake := startKeyServer(t, ca.issue(t, "fake-temporal", true).TLS)
	_, err := server.Start(ctx, server.Config{Listen: "127.0.0.1:0", DatabaseURL: db, TemporalAddress: fake.Addr,
		TemporalNamespace: namespace, TemporalSecurity: temporalconn.Security{CAFile: ca.File, APIKey: "server-key"},
		Log: quiet()})
	if err == nil {
		t.Fatal("the server started against a fake Temporal")
	}
	if calls := fake.Calls(); len(calls) == 0 || !strings.HasSuffix(calls[0], ": Bearer server-key") {
		t.Errorf("server calls = %q, want the bearer token server-key", calls)
	}
}
