package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestComposeInitScript runs compose's init service, as written in
// compose.yaml, against a real PostgreSQL and Temporal: with the real
// intend binary as `intend`, the container's environment, and a
// directory of its own for the volume. It must succeed twice (compose
// runs it on every up), make environment prod with no autostarted agents
// and one executor token, readable by its owner only, and keep that token
// the second time; with the volume lost and the database kept, it
// replaces the token.
func TestComposeInitScript(t *testing.T) {
	f := loadCompose(t)
	init := f.Services["init"]
	if len(init.Entrypoint) != 2 || init.Entrypoint[0] != "/bin/sh" || len(init.Command) != 1 {
		t.Fatalf("init runs %v %v, want /bin/sh -ec SCRIPT", init.Entrypoint, init.Command)
	}
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "intend"), "../cmd/intend").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	volume := t.TempDir()
	port, err := childproc.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + strconv.Itoa(port)
	// What compose does to the text: $$ is a literal $. The volume and the
	// short-lived server's port are this test's.
	script := strings.ReplaceAll(init.Command[0], "$$", "$")
	script = strings.ReplaceAll(script, "/var/lib/intend-init", volume)
	script = strings.ReplaceAll(script, "127.0.0.1:8890", listen)

	db := testenv.Database(t)
	_, temporal, namespace := testenv.Temporal(t)
	bootstrap := strings.Repeat("b0075", 8)
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range init.Environment {
		switch k {
		case "INTEND_DATABASE_URL":
			v = db
		case "INTEND_TEMPORAL_ADDRESS":
			v = temporal
		case "INTEND_TEMPORAL_NAMESPACE":
			v = namespace
		case "INTEND_BOOTSTRAP_TOKEN", "INTEND_TOKEN":
			v = bootstrap
		default:
			v = strings.ReplaceAll(v, "127.0.0.1:8890", listen)
		}
		env = append(env, k+"="+v)
	}
	env = append(env, "INTEND_DATA_DIR="+t.TempDir())

	tokenFile := filepath.Join(volume, "executor-web1.token")
	var first []byte
	for run := 1; run <= 3; run++ {
		if run == 3 {
			if err := os.Remove(tokenFile); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.CommandContext(t.Context(), "/bin/sh", init.Entrypoint[1], script)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("init, run %d: %v\n%s", run, err, out)
		}
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if len(bytes.TrimSpace(b)) < 32 {
			t.Fatalf("run %d: the token file holds %q", run, b)
		}
		if fi, _ := os.Stat(tokenFile); fi.Mode().Perm() != 0o600 {
			t.Errorf("run %d: the token file has mode %v, want 0600", run, fi.Mode().Perm())
		}
		switch run {
		case 1:
			first = b
		case 2:
			if !bytes.Equal(first, b) {
				t.Error("the second run replaced the executor token")
			}
		case 3:
			if bytes.Equal(first, b) {
				t.Error("the token file was lost and the same token came back")
			}
		}
	}

	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := st.GetEnvironment(t.Context(), "prod")
	if err != nil {
		t.Fatalf("environment prod: %v", err)
	}
	if len(e.Settings.AutostartAgents) != 0 {
		t.Errorf("prod's autostart_agents = %v, want none (its agents are the external executors')", e.Settings.AutostartAgents)
	}
	// Live tokens only: the replaced one is revoked.
	tokens, err := st.ListTokens(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	var executors []string
	for _, tk := range tokens {
		if tk.Role == "executor" {
			executors = append(executors, tk.Name+":"+strings.Join(tk.Agents, ","))
		}
	}
	if !slices.Equal(executors, []string{"executor-web1:web1"}) {
		t.Errorf("live executor tokens %v, want one, executor-web1 for agent web1", executors)
	}
}
