package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/executor"
	"github.com/intendhq/intend/internal/temporalconn"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startServer runs an intend server on a fresh database against Temporal
// at address (the shared dev server, or a proxy in front of it).
// It returns a client and the server's URL.
// startServer starts a server that connects to Temporal with sec; its
// embedded executors connect with execSec, when given (their own
// credentials, never the server's).
func startServer(t *testing.T, address string, sec temporalconn.Security, execSec ...temporalconn.Security) (*client.Client, string) {
	t.Helper()
	cfg := server.Config{
		TemporalAddress: address, TemporalSecurity: sec, EmbeddedExecutor: true, ExecutorName: "server-1",
		Version: "server-test", ReconcileEvery: time.Second, SchedulerPoll: time.Second,
	}
	if len(execSec) > 0 {
		cfg.ExecutorTemporalSecurity = &execSec[0]
	}
	c, srv, _ := servertest.StartServer(t, cfg)
	return c, srv.URL()
}

func newEnv(t *testing.T, c *client.Client, settings map[string]any) string {
	t.Helper()
	return servertest.NewEnvironment(t, c, "ex", settings)
}

// deployFile exports and releases one fs::File of agent and waits for its
// run to deploy it. content is the attribute, want what the file must hold.
func deployFile(t *testing.T, c *client.Client, env, agent string, content any, want string) string {
	t.Helper()
	ctx := context.Background()
	target := filepath.Join(t.TempDir(), agent+".txt")
	body, _ := json.Marshal(map[string]any{"resources": []map[string]any{{
		"id":         "fs::File[" + agent + ",path=" + target + "]",
		"attributes": map[string]any{"path": target, "content": content},
	}}})
	reqID := servertest.Release(t, c, env, body)
	run, err := c.WaitRequest(ctx, env, reqID, 60*time.Second, nil)
	if err != nil || run.Deployed != 1 {
		t.Fatalf("run = %+v, %v", run, err)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != want {
		t.Fatalf("%s = %q, %v", target, got, err)
	}
	return target
}

// startExecutor runs `executor` with args, in process, as intend's CLI and
// custom binaries do.
func startExecutor(t *testing.T, env map[string]string, args ...string) *servertest.Func {
	t.Helper()
	return servertest.StartFunc(t, func(ctx context.Context, out io.Writer) error {
		cmd := executor.Command(executor.WithBuiltins(), executor.WithVersion("exec-test"),
			executor.WithGetenv(func(k string) string { return env[k] }))
		cmd.SetArgs(args)
		cmd.SetOut(out)
		cmd.SetErr(out)
		return cmd.ExecuteContext(ctx)
	})
}

// runExecutor runs `executor` with args until it returns by itself (it
// is expected to fail) or 60 s pass.
func runExecutor(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := executor.Command(executor.WithBuiltins(), executor.WithGetenv(func(k string) string { return env[k] }))
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(ctx)
	if ctx.Err() != nil {
		t.Fatalf("the executor ran for 60 s (err %v)\n%s", err, out.String())
	}
	return out.String(), err
}

// agents returns the executors of each agent of env; the API lists none as
// an empty list, never null.
func agents(t *testing.T, c *client.Client, env string) map[string][]client.AgentExecutor {
	t.Helper()
	out := map[string][]client.AgentExecutor{}
	for _, a := range servertest.Agents(t, c, env) {
		if a.Executors == nil {
			t.Errorf("agent %s: executors is null, want a list", a.Name)
		}
		out[a.Name] = a.Executors
	}
	return out
}

func executors(t *testing.T, c *client.Client, env string) map[string]client.Executor {
	t.Helper()
	out := map[string]client.Executor{}
	for _, e := range servertest.Executors(t, c, env) {
		out[e.Name] = e
	}
	return out
}

// waitExecutor waits until the environment lists the named executor.
func waitExecutor(t *testing.T, c *client.Client, env, name string, out fmt.Stringer) client.Executor {
	t.Helper()
	var e client.Executor
	wait.For(t, "executor "+name+" to register in "+env, 30*time.Second, func() error {
		var ok bool
		e, ok = executors(t, c, env)[name]
		return wait.Unless(ok, "not listed\n%s", out)
	})
	return e
}

// TestRegistration: an executor shows in GET .../executors and, for the
// agents it serves, in GET .../agents; its actions name it; a clean stop
// marks it stopped. The server's embedded executor registers too.
func TestRegistration(t *testing.T) {
	_, hostPort, namespace := testenv.Temporal(t)
	c, url := startServer(t, hostPort, temporalconn.Security{})
	ctx := context.Background()
	env := newEnv(t, c, map[string]any{"autostart_agents": []string{}})
	token := servertest.ExecutorToken(t, c, env, "remote", "spare")
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "greeting"), []byte("from the secrets dir\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The executor runs in this process and reads env: references from
	// its environment, only those with its prefix.
	t.Setenv("EXECTEST_GREETING", "from a prefixed variable")
	ex := startExecutor(t, map[string]string{"INTEND_TOKEN": token}, "--environment", env, "--agent", "remote", "--agent", "spare",
		"--name", "exec-a", "--server", url, "--temporal-address", hostPort, "--temporal-namespace", namespace,
		"--log-level", "warn", "--secrets-dir", secrets, "--secret-env-prefix", "EXECTEST_")

	e := waitExecutor(t, c, env, "exec-a", ex.Out)
	host, _ := os.Hostname()
	if e.Hostname != host || e.PID != os.Getpid() || e.Version != "exec-test" || !e.Live || e.Embedded ||
		strings.Join(e.Agents, ",") != "remote,spare" || e.StoppedAt != nil || e.StartedAt.IsZero() || e.LastSeen.IsZero() {
		t.Errorf("registration = %+v", e)
	}
	// A file: reference resolves in --secrets-dir.
	deployFile(t, c, env, "remote", map[string]any{"secret": "file:greeting"}, "from the secrets dir")
	as := agents(t, c, env)
	if len(as["remote"]) != 1 || as["remote"][0].Name != "exec-a" || !as["remote"][0].Live ||
		as["remote"][0].Version != "exec-test" || as["remote"][0].Hostname != host {
		t.Errorf("executors of agent remote = %+v, want exec-a, live", as["remote"])
	}
	var acts struct{ Items []client.Action }
	if err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+env+"/actions", nil, &acts); err != nil {
		t.Fatal(err)
	}
	if len(acts.Items) != 1 || acts.Items[0].Executor != "exec-a" {
		t.Errorf("actions = %+v, want one by exec-a", acts.Items)
	}
	// An env: reference resolves with --secret-env-prefix.
	deployFile(t, c, env, "remote", map[string]any{"secret": "env:EXECTEST_GREETING"}, "from a prefixed variable")

	// The embedded executor of another environment.
	env2 := newEnv(t, c, nil)
	deployFile(t, c, env2, "localhost", "served by the server\n", "served by the server\n")
	as = agents(t, c, env2)
	if len(as["localhost"]) != 1 || as["localhost"][0].Name != "server-1" || !as["localhost"][0].Embedded ||
		!as["localhost"][0].Live {
		t.Errorf("executors of agent localhost = %+v, want the embedded server-1", as["localhost"])
	}

	if err := ex.Stop(); err != nil {
		t.Fatalf("executor: %v\n%s", err, ex.Out)
	}
	e = executors(t, c, env)["exec-a"]
	if e.StoppedAt == nil || e.Live {
		t.Errorf("after a clean stop: %+v, want stopped and not live", e)
	}
	if as := agents(t, c, env); len(as["remote"]) != 0 {
		t.Errorf("executors of agent remote after the stop = %+v, want none", as["remote"])
	}
}

// TestMutualTLS puts a TLS-terminating proxy that requires a client
// certificate in front of Temporal: the server and an executor with the
// right certificate work through it; without a certificate, or trusting
// another CA, the executor fails at start with an error saying so.
func TestMutualTLS(t *testing.T) {
	_, hostPort, namespace := testenv.Temporal(t)
	ca, rogue := newCA(t, "test-ca"), newCA(t, "rogue-ca")
	proxy := startMTLSProxy(t, hostPort, ca, ca.issue(t, "temporal", true))
	serverCert, execCert := ca.issue(t, "intend-server", false), ca.issue(t, "intend-executor", false)

	c, url := startServer(t, proxy.Addr, temporalconn.Security{CAFile: ca.File, CertFile: serverCert.CertFile,
		KeyFile: serverCert.KeyFile}, temporalconn.Security{CAFile: ca.File, CertFile: execCert.CertFile, KeyFile: execCert.KeyFile})
	if n, _ := proxy.Admitted("intend-server"); n == 0 {
		t.Fatal("the server did not connect through the proxy")
	}
	env := newEnv(t, c, map[string]any{"autostart_agents": []string{}})
	base := []string{"--environment", env, "--agent", "remote", "--server", url, "--token", servertest.ExecutorToken(t, c, env, "remote"),
		"--temporal-address", proxy.Addr, "--temporal-namespace", namespace, "--log-level", "warn"}

	// No client certificate: refused by the proxy.
	out, err := runExecutor(t, nil, append(base, "--temporal-tls-ca", ca.File)...)
	if err == nil || !strings.Contains(err.Error(), proxy.Addr) ||
		!strings.Contains(err.Error(), "TLS without a client certificate") ||
		!strings.Contains(err.Error(), "certificate required") {
		t.Errorf("without a client certificate: %v, want a connection error naming the address, TLS and "+
			"the missing certificate\n%s", err, out)
	}
	t.Logf("without a client certificate: %v", err)
	// The proxy's side of the failed handshake may end after the client's.
	wait.For(t, "the proxy to refuse a handshake", 5*time.Second, func() error {
		_, refused := proxy.Admitted("")
		return wait.Unless(refused > 0, "it refused none")
	})
	// A client certificate, but the server's is not trusted.
	out, err = runExecutor(t, map[string]string{"INTEND_TEMPORAL_TLS_CERT": execCert.CertFile,
		"INTEND_TEMPORAL_TLS_KEY": execCert.KeyFile}, append(base, "--temporal-tls-ca", rogue.File)...)
	if err == nil || !strings.Contains(err.Error(), "mutual TLS") ||
		!strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("trusting another CA: %v, want an unknown authority error\n%s", err, out)
	}
	t.Logf("trusting another CA: %v", err)
	// Half a key pair is refused before dialling.
	if _, err := runExecutor(t, nil, append(base, "--temporal-tls-cert", execCert.CertFile)...); err == nil || !strings.Contains(err.Error(), "--temporal-tls-key") {
		t.Errorf("a certificate without its key: %v", err)
	}

	// The right certificate: the executor serves its agent through the proxy.
	running := startExecutor(t, nil, append(base, "--name", "exec-tls", "--temporal-tls-ca", ca.File,
		"--temporal-tls-cert", execCert.CertFile, "--temporal-tls-key", execCert.KeyFile)...)
	waitExecutor(t, c, env, "exec-tls", running.Out)
	deployFile(t, c, env, "remote", "over mutual TLS\n", "over mutual TLS\n")
	if n, _ := proxy.Admitted("intend-executor"); n == 0 {
		t.Errorf("the executor did not connect with its certificate\n%s", running.Out)
	}
}
