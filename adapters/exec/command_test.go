package exec_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/exec"
)

// attempt is what one engine run did.
type attempt struct {
	out  adapters.Outcome
	err  error
	logs []adapters.LogLine
}

// apply runs the engine once on r, as the executor does.
func apply(t *testing.T, r adapters.Resource, dryRun bool, opts ...adapters.ContextOption) attempt {
	t.Helper()
	hc := adapters.NewContext(opts...)
	defer hc.Close()
	out, err := adapters.Run(context.Background(), exec.Command{}, hc, r, dryRun)
	return attempt{out: out, err: err, logs: hc.Logs()}
}

// line returns the first log line whose message is msg.
func (a attempt) line(t *testing.T, msg string) adapters.LogLine {
	t.Helper()
	for _, l := range a.logs {
		if l.Message == msg {
			return l
		}
	}
	t.Fatalf("no log line %q in %s", msg, a.logsJSON(t))
	return adapters.LogLine{}
}

func (a attempt) logsJSON(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(a.logs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ran counts the lines of dir/ran.log: one per run of a command that
// appends to it.
func ran(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "ran.log"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// jsonAttrs decodes attributes as the executor does (numbers as
// json.Number).
func jsonAttrs(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestGuards: each guard, alone and together, decides whether the command
// runs; a command that ran is not run again by the next deploy.
func TestGuards(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		reason string
		setup  func(t *testing.T, dir string)
		attrs  func(dir string) map[string]any
		// want is the engine's first decision; runs how often the command
		// ran over two deploys.
		want adapters.Operation
		runs int
	}{
		{
			name: "creates absent", reason: "nothing at the path: run, once",
			attrs: func(dir string) map[string]any {
				return map[string]any{"command": "echo >> ran.log; touch made", "creates": filepath.Join(dir, "made")}
			},
			want: "create", runs: 1,
		},
		{
			name: "creates present", reason: "something at the path: done",
			setup: func(t *testing.T, dir string) { touch(t, filepath.Join(dir, "made")) },
			attrs: func(dir string) map[string]any {
				return map[string]any{"command": "echo >> ran.log", "creates": filepath.Join(dir, "made")}
			},
			want: "none", runs: 0,
		},
		{
			name: "creates is a dangling symlink", reason: "anything at the path counts, even a link to nothing",
			setup: func(t *testing.T, dir string) {
				if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "made")); err != nil {
					t.Fatal(err)
				}
			},
			attrs: func(dir string) map[string]any {
				return map[string]any{"command": "echo >> ran.log", "creates": filepath.Join(dir, "made")}
			},
			want: "none", runs: 0,
		},
		{
			name: "unless exits 0", reason: "unless succeeding means done",
			attrs: func(string) map[string]any {
				return map[string]any{"command": "echo >> ran.log", "unless": "true"}
			},
			want: "none", runs: 0,
		},
		{
			name: "unless exits non-zero", reason: "unless failing means run; the command makes it succeed",
			attrs: func(string) map[string]any {
				return map[string]any{"command": "echo >> ran.log; touch made", "unless": []any{"test", "-e", "made"}}
			},
			want: "create", runs: 1,
		},
		{
			name: "onlyif exits 0", reason: "onlyif succeeding means run; the command makes it fail",
			attrs: func(string) map[string]any {
				return map[string]any{"command": "echo >> ran.log; touch made", "onlyif": "test ! -e made"}
			},
			want: "create", runs: 1,
		},
		{
			name: "onlyif exits non-zero", reason: "onlyif failing means done",
			attrs: func(string) map[string]any {
				return map[string]any{"command": "echo >> ran.log", "onlyif": "exit 3"}
			},
			want: "none", runs: 0,
		},
		{
			name: "creates absent but unless exits 0", reason: "one guard saying done is enough",
			attrs: func(dir string) map[string]any {
				return map[string]any{"command": "echo >> ran.log", "creates": filepath.Join(dir, "made"), "unless": "true"}
			},
			want: "none", runs: 0,
		},
		{
			name: "unless exits non-zero but onlyif fails", reason: "every guard must say run",
			attrs: func(string) map[string]any {
				return map[string]any{"command": "echo >> ran.log", "unless": "false", "onlyif": "false"}
			},
			want: "none", runs: 0,
		},
		{
			name: "all guards say run", reason: "the command runs, and satisfies one guard (creates)",
			attrs: func(dir string) map[string]any {
				return map[string]any{"command": "echo >> ran.log; touch made", "creates": filepath.Join(dir, "made"),
					"unless": "false", "onlyif": "true"}
			},
			want: "create", runs: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			attrs := tc.attrs(dir)
			attrs["cwd"] = dir
			r := command(attrs)
			first := apply(t, r, false)
			if first.err != nil || first.out.Action != tc.want {
				t.Fatalf("first deploy: action %q, error %v; want %q (%s)", first.out.Action, first.err, tc.want, tc.reason)
			}
			second := apply(t, r, false)
			if second.err != nil || second.out.Action != "none" {
				t.Fatalf("second deploy: action %q, error %v; want none (%s)", second.out.Action, second.err, tc.reason)
			}
			if got := ran(t, dir); got != tc.runs {
				t.Errorf("the command ran %d times over two deploys, want %d (%s)", got, tc.runs, tc.reason)
			}
		})
	}
}

// TestDryRunRunsOnlyGuards: a dry-run asks the guards and reports the
// create, but does not run the command.
func TestDryRunRunsOnlyGuards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := command(map[string]any{"command": "echo >> ran.log; touch made", "cwd": dir,
		"unless": "echo >> guard.log; test -e made"})
	a := apply(t, r, true)
	if a.err != nil || a.out.Action != "create" {
		t.Fatalf("dry-run: action %q, error %v; want create", a.out.Action, a.err)
	}
	if got := ran(t, dir); got != 0 {
		t.Errorf("a dry-run ran the command %d times", got)
	}
	if !exists(filepath.Join(dir, "guard.log")) {
		t.Errorf("a dry-run did not ask the unless guard")
	}
}

// TestDoesNotConverge: a command that succeeds but leaves its guard saying
// "run" would run on every deploy: a permanent error naming the guard.
func TestDoesNotConverge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := apply(t, command(map[string]any{"command": "echo >> ran.log", "cwd": dir,
		"creates": filepath.Join(dir, "never")}), false)
	if a.err == nil || adapters.ClassOf(a.err) != adapters.ClassPermanent ||
		!strings.Contains(a.err.Error(), "does not converge") || !strings.Contains(a.err.Error(), "never") {
		t.Fatalf("error = %v, want a permanent one saying the command does not converge, naming creates' path", a.err)
	}
	if got := ran(t, dir); got != 1 {
		t.Errorf("the command ran %d times, want 1", got)
	}
}

// TestReturns: exit codes in returns succeed; others are transient errors
// that point at the output in the log, never quote it (the output is a
// sensitive output, the error is shown to every reader).
func TestReturns(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		reason  string
		attrs   string // JSON, as the executor decodes it
		wantErr string // empty: success
		class   adapters.Class
	}{
		{"accepted non-zero", "3 is listed in returns",
			`{"command": "touch made; exit 3", "returns": [0, 3]}`, "", ""},
		{"default refuses non-zero", "returns defaults to [0]",
			`{"command": "echo partial; echo boom >&2; touch made; exit 3"}`, `exited with status 3 (accepted: [0]); its stderr and stdout: see the action log`, adapters.ClassTransient},
		{"zero not listed", "returns replaces the default",
			`{"command": "touch made", "returns": [2]}`, `exited with status 0 (accepted: [2])`, adapters.ClassTransient},
		{"stdout when stderr is empty", "the error names only the stream that has output",
			`{"command": "echo only-stdout; exit 1"}`, `exited with status 1 (accepted: [0]); its stdout: see the action log`, adapters.ClassTransient},
		{"shell cannot find a program", "exit 127 from sh: retrying cannot help",
			`{"command": "no-such-program-intend-test"}`, `could not find or run a program (exit status 127)`, adapters.ClassPermanent},
		{"program not found", "an argv whose program is not in PATH",
			`{"command": ["no-such-program-intend-test"]}`, `program "no-such-program-intend-test" not found in PATH`, adapters.ClassPermanent},
		{"program not executable", "an argv naming a file that is not executable",
			`{"command": ["./made-not-exec"]}`, `program "./made-not-exec": is not executable`, adapters.ClassPermanent},
		{"cwd missing", "a bad working directory",
			`{"command": "touch made", "cwd": "/nonexistent/intend-test"}`, `attribute "cwd": /nonexistent/intend-test: no such file or directory`, adapters.ClassPermanent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			touch(t, filepath.Join(dir, "made-not-exec"))
			attrs := jsonAttrs(t, tc.attrs)
			if _, ok := attrs["cwd"]; !ok {
				attrs["cwd"] = dir
			}
			attrs["creates"] = filepath.Join(dir, "made")
			a := apply(t, command(attrs), false)
			if tc.wantErr == "" {
				if a.err != nil || a.out.Action != "create" || !exists(filepath.Join(dir, "made")) {
					t.Fatalf("action %q, error %v; want a create that ran the command (%s)", a.out.Action, a.err, tc.reason)
				}
				if l := a.line(t, "command exited"); l.Level != "INFO" || l.Attrs["exit_code"] != int64(3) {
					t.Errorf("log line = %+v, want INFO with exit code 3", l)
				}
				return
			}
			if a.err == nil || !strings.Contains(a.err.Error(), tc.wantErr) || adapters.ClassOf(a.err) != tc.class {
				t.Fatalf("error = %v (%s), want a %s error containing %q (%s)",
					a.err, adapters.ClassOf(a.err), tc.class, tc.wantErr, tc.reason)
			}
			for _, out := range []string{"partial", "boom", "only-stdout"} {
				if strings.Contains(a.err.Error(), out) {
					t.Errorf("error = %v quotes the output %q: every reader of the action log would see it", a.err, out)
				}
			}
		})
	}
}

// TestOutputLogged: stdout, stderr, exit code and duration of a command are
// in the log.
func TestOutputLogged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := apply(t, command(map[string]any{"command": "echo to-stdout; echo to-stderr >&2; touch made",
		"cwd": dir, "creates": filepath.Join(dir, "made")}), false)
	if a.err != nil {
		t.Fatal(a.err)
	}
	l := a.line(t, "command exited")
	if l.Attrs["stdout"] != "to-stdout\n" || l.Attrs["stderr"] != "to-stderr\n" || l.Attrs["exit_code"] != int64(0) {
		t.Errorf("log attrs = %v, want the output and exit code 0", l.Attrs)
	}
	if d, err := time.ParseDuration(fmt.Sprint(l.Attrs["duration"])); err != nil || d <= 0 {
		t.Errorf("duration = %v (%v), want a positive duration", l.Attrs["duration"], err)
	}
	if _, ok := l.Attrs["stdout_dropped_bytes"]; ok {
		t.Errorf("short output reported as dropped: %v", l.Attrs)
	}
	if !slices.Equal(l.SensitiveOutputs, []string{"stderr", "stdout"}) {
		t.Errorf("sensitive outputs = %v, want stdout and stderr declared sensitive", l.SensitiveOutputs)
	}
}

// TestOutputBounded: only the end of a long output is kept, saying how
// much was dropped.
func TestOutputBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const total = 300000 // bytes of stdout: 299997 'a', then END
	cmd := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; printf END; echo short >&2; touch made", total-3)
	a := apply(t, command(map[string]any{"command": cmd, "cwd": dir, "creates": filepath.Join(dir, "made")}), false)
	if a.err != nil {
		t.Fatal(a.err)
	}
	l := a.line(t, "command exited")
	out, _ := l.Attrs["stdout"].(string)
	if len(out) != 64<<10 || !strings.HasSuffix(out, "aaaEND") {
		t.Errorf("stdout kept = %d bytes ending %q, want the last 64 KiB ending with END", len(out), out[max(0, len(out)-6):])
	}
	if got := l.Attrs["stdout_dropped_bytes"]; got != int64(total-64<<10) {
		t.Errorf("stdout_dropped_bytes = %v, want %d", got, total-64<<10)
	}
	if l.Attrs["stderr"] != "short\n" {
		t.Errorf("stderr = %q", l.Attrs["stderr"])
	}
	if _, ok := l.Attrs["stderr_dropped_bytes"]; ok {
		t.Errorf("stderr was not cut but reported dropped: %v", l.Attrs)
	}
}

// TestTimeoutKillsProcessGroup: a command past its timeout fails
// transiently and its whole process group is killed, children included.
func TestTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// sleep runs in the background, so killing only the shell would
	// leave it behind.
	r := command(map[string]any{"command": "sleep 60 & echo $! > child.pid; wait", "cwd": dir,
		"creates": filepath.Join(dir, "never"), "timeout": 0.5})
	start := time.Now()
	a := apply(t, r, false)
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("the attempt took %s with a 0.5 s timeout", elapsed)
	}
	if a.err == nil || adapters.ClassOf(a.err) != adapters.ClassTransient || !strings.Contains(a.err.Error(), "timed out after 500ms") ||
		!strings.Contains(a.err.Error(), `attribute "timeout"`) {
		t.Fatalf("error = %v, want a transient timeout naming the attribute", a.err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatalf("the command did not start its child: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the command's child %d is still running after the timeout: the process group was not killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.line(t, "command did not finish")
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestSecretEnv: a secret reference in env reaches the command as its
// value and is masked in every log line; the error holds no output.
func TestSecretEnv(t *testing.T) {
	t.Parallel()
	const value = "s3cr3t-intend-value"
	secrets := adapters.WithSecrets(&adapters.Secrets{LookupEnv: func(name string) (string, bool) {
		return value, name == "INTEND_SECRET_EXEC_TEST_TOKEN"
	}})
	dir := t.TempDir()
	env := map[string]any{"TOKEN": map[string]any{"secret": "env:INTEND_SECRET_EXEC_TEST_TOKEN"}}
	a := apply(t, command(map[string]any{"cwd": dir, "env": env, "creates": filepath.Join(dir, "secret.txt"),
		"command": `printf %s "$TOKEN" > secret.txt; echo "token=$TOKEN"; echo "$TOKEN" >&2`}), false, secrets)
	if a.err != nil {
		t.Fatal(a.err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "secret.txt")); err != nil || string(b) != value {
		t.Fatalf("the command saw TOKEN=%q (%v), want the secret's value", b, err)
	}
	if logs := a.logsJSON(t); strings.Contains(logs, value) {
		t.Errorf("the secret value is in the log: %s", logs)
	}
	if l := a.line(t, "command exited"); l.Attrs["stdout"] != "token="+adapters.Masked+"\n" || l.Attrs["stderr"] != adapters.Masked+"\n" {
		t.Errorf("output = %v, want the secret masked", l.Attrs)
	}

	failed := apply(t, command(map[string]any{"cwd": dir, "env": env, "creates": filepath.Join(dir, "never"),
		"command": `echo "bad token $TOKEN" >&2; exit 1`}), false, secrets)
	if failed.err == nil || strings.Contains(failed.err.Error(), value) || strings.Contains(failed.err.Error(), "bad token") {
		t.Errorf("error = %v, want the failure without the output (it is in the log)", failed.err)
	}
	if l := failed.line(t, "command failed"); l.Attrs["stderr"] != "bad token "+adapters.Masked+"\n" {
		t.Errorf("output of the failure = %v, want the secret masked", l.Attrs)
	}
	if logs := failed.logsJSON(t); strings.Contains(logs, value) {
		t.Errorf("the secret value is in the log of the failure: %s", logs)
	}
}

// TestEnvironment: commands get only PATH and env, no stdin; env may
// replace PATH, and an argv's program is looked up in the command's PATH.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "intend-test-prog"), []byte("#!/bin/sh\necho prog ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	event := adapters.WithEvent(true)
	cases := []struct {
		name    string
		reason  string
		command any
		env     map[string]any
		stdout  func(out string) bool
	}{
		{"minimal environment", "only PATH from the executor, plus env",
			[]any{"env"}, map[string]any{"FOO": "bar"},
			func(out string) bool {
				lines := strings.Split(strings.TrimSpace(out), "\n")
				sort.Strings(lines)
				return len(lines) == 2 && lines[0] == "FOO=bar" && lines[1] == "PATH="+os.Getenv("PATH")
			}},
		{"no stdin", "cat reads an empty stdin and ends instead of waiting",
			[]any{"cat"}, nil, func(out string) bool { return out == "" }},
		{"PATH from env", "the program is found in the command's own PATH",
			[]any{"intend-test-prog"}, map[string]any{"PATH": bin + ":" + os.Getenv("PATH")},
			func(out string) bool { return out == "prog ran\n" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			attrs := map[string]any{"command": tc.command, "refresh_only": true, "timeout": 10}
			if tc.env != nil {
				attrs["env"] = tc.env
			}
			a := apply(t, command(attrs), false, event)
			if a.err != nil {
				t.Fatalf("%v (%s)", a.err, tc.reason)
			}
			if out, _ := a.line(t, "command exited").Attrs["stdout"].(string); !tc.stdout(out) {
				t.Errorf("stdout = %q (%s)", out, tc.reason)
			}
		})
	}
}

// TestRefreshOnly: a refresh_only command runs only when a dependency sends
// an event, never in dry-run, and not when its guards say it is done.
func TestRefreshOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := command(map[string]any{"command": "echo >> ran.log", "cwd": dir, "refresh_only": true})
	steps := []struct {
		name   string
		r      adapters.Resource
		dryRun bool
		opts   []adapters.ContextOption
		runs   int // total after the step
	}{
		{"deploy without an event", r, false, nil, 0},
		{"dry-run with an event", r, true, []adapters.ContextOption{adapters.WithEvent(true)}, 0},
		{"deploy with an event", r, false, []adapters.ContextOption{adapters.WithEvent(true)}, 1},
		{"another event", r, false, []adapters.ContextOption{adapters.WithEvent(true)}, 2},
		{"event, guard says done", command(map[string]any{"command": "echo >> ran.log", "cwd": dir,
			"refresh_only": true, "creates": filepath.Join(dir, "ran.log")}), false,
			[]adapters.ContextOption{adapters.WithEvent(true)}, 2},
	}
	for _, st := range steps {
		a := apply(t, st.r, st.dryRun, st.opts...)
		if a.err != nil || a.out.Action != "none" {
			t.Fatalf("%s: action %q, error %v; want none (the guards never run a refresh_only command)",
				st.name, a.out.Action, a.err)
		}
		if got := ran(t, dir); got != st.runs {
			t.Fatalf("%s: the command ran %d times in all, want %d", st.name, got, st.runs)
		}
	}

	// A command with guards that is not refresh_only is run by its guards
	// only: an event does not run it again.
	guarded := command(map[string]any{"command": "echo >> guarded.log; echo >> ran.log", "cwd": dir,
		"creates": filepath.Join(dir, "guarded.log")})
	for i := 0; i < 2; i++ {
		if a := apply(t, guarded, false, adapters.WithEvent(true)); a.err != nil {
			t.Fatal(a.err)
		}
	}
	if got := ran(t, dir); got != 3 {
		t.Errorf("a guarded command with events ran %d times in all, want 3 (once more)", got-2)
	}
}

// TestPurge: a purge runs undo when the guards say the command's effect is
// there; without undo it changes nothing; an undo that leaves the effect
// fails.
func TestPurge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	made := filepath.Join(dir, "made")
	attrs := func(undo any) map[string]any {
		a := map[string]any{"command": "touch made", "cwd": dir, "creates": made}
		if undo != nil {
			a["undo"] = undo
		}
		return a
	}
	purged := func(a map[string]any) adapters.Resource {
		r := command(a)
		r.Purged = true
		return r
	}
	if a := apply(t, command(attrs(nil)), false); a.err != nil || !exists(made) {
		t.Fatalf("create: %v", a.err)
	}

	if a := apply(t, purged(attrs(nil)), false); a.err != nil || a.out.Action != "none" || !exists(made) {
		t.Fatalf("purge without undo: action %q, error %v, file there %t; want nothing done",
			a.out.Action, a.err, exists(made))
	}

	a := apply(t, purged(attrs("true")), false)
	if a.err == nil || adapters.ClassOf(a.err) != adapters.ClassPermanent || !strings.Contains(a.err.Error(), "does not converge") {
		t.Fatalf("purge with an undo that does nothing: error %v, want a permanent one saying it does not converge", a.err)
	}

	if a := apply(t, purged(attrs([]any{"rm", made})), true); a.err != nil || a.out.Action != "delete" || !exists(made) {
		t.Fatalf("dry-run of the purge: action %q, error %v, file there %t; want delete, nothing done",
			a.out.Action, a.err, exists(made))
	}
	// A purge needs only the guards and undo, not the command.
	undoOnly := attrs([]any{"rm", made})
	delete(undoOnly, "command")
	if a := apply(t, purged(undoOnly), false); a.err != nil || a.out.Action != "delete" || exists(made) {
		t.Fatalf("purge: action %q, error %v, file there %t; want delete, file removed", a.out.Action, a.err, exists(made))
	}
	if a := apply(t, purged(undoOnly), false); a.err != nil || a.out.Action != "none" {
		t.Fatalf("purge again: action %q, error %v; want none", a.out.Action, a.err)
	}
}

// TestValidation: bad attributes are refused, in dry-run, with a permanent
// error naming the attribute, and nothing runs.
func TestValidation(t *testing.T) {
	t.Parallel()
	// ok is a valid command in dir; with changes one attribute (nil
	// removes it).
	ok := func(dir string) map[string]any {
		return map[string]any{"command": "echo >> ran.log; touch made", "cwd": dir, "creates": filepath.Join(dir, "made")}
	}
	with := func(k string, v any) func(dir string) adapters.Resource {
		return func(dir string) adapters.Resource {
			r := command(ok(dir))
			if v == nil {
				delete(r.Attributes, k)
			} else {
				r.Attributes[k] = v
			}
			return r
		}
	}
	raw := func(purged bool, f func(dir string) map[string]any) func(dir string) adapters.Resource {
		return func(dir string) adapters.Resource {
			return adapters.Resource{ID: command(map[string]any{}).ID, Purged: purged, Attributes: f(dir)}
		}
	}
	cases := []struct {
		name   string
		reason string
		r      func(dir string) adapters.Resource
		want   string // a part of the error; empty: accepted
	}{
		{"valid", "the base of the other cases", with("timeout", 5), ""},
		{"no guard", "it would run on every deploy", with("creates", nil), `attribute "creates" (or "unless" or "onlyif") is required`},
		{"no guard, refresh_only", "it runs only on events",
			func(string) adapters.Resource {
				return command(map[string]any{"command": "true", "refresh_only": true})
			}, ""},
		{"no command", "nothing to run", with("command", nil), `attribute "command": is required`},
		{"command a number", "neither form", with("command", 7), `attribute "command": must be a string`},
		{"command blank", "nothing to run", with("command", "  "), `attribute "command": must not be empty`},
		{"argv not strings", "each argument is a string", with("command", []any{"echo", 1}), `attribute "command": element 1 must be a string`},
		{"argv empty program", "the first element is the program", with("command", []any{"", "x"}), `attribute "command": the list must start with the program`},
		{"cwd relative", "it would depend on the executor", with("cwd", "tmp"), `attribute "cwd": "tmp" is not an absolute path`},
		{"creates relative", "it would depend on the cwd", with("creates", "made"), `attribute "creates": "made" is not an absolute path`},
		{"env not a map", "names to values", with("env", []any{"A=1"}), `attribute "env": must be a map`},
		{"env value not a string", "values are strings", with("env", map[string]any{"A": 1}), `attribute "env": the value of "A" must be a string`},
		{"env bad name", "'=' cannot be in a name", with("env", map[string]any{"A=B": "x"}), `attribute "env": "A=B" is not a variable name`},
		{"unless bad", "a guard is a command", with("unless", true), `attribute "unless": must be a string`},
		{"onlyif bad", "a guard is a command", with("onlyif", []any{}), `attribute "onlyif": the list must start`},
		{"undo bad", "undo is a command", with("undo", ""), `attribute "undo": must not be empty`},
		{"timeout zero", "it would never run", with("timeout", 0), `attribute "timeout": must be more than 0`},
		{"timeout a string", "seconds are a number", with("timeout", "10"), `attribute "timeout": must be a number`},
		{"timeout too long", "more than a day is a unit mistake", with("timeout", 90000), `attribute "timeout": must be more than 0 and at most 86400`},
		{"timeout from JSON", "the executor hands numbers as json.Number", with("timeout", json.Number("2.5")), ""},
		{"returns from JSON", "the executor hands numbers as json.Number", with("returns", []any{json.Number("0"), json.Number("2")}), ""},
		{"returns not a list", "a list of codes", with("returns", 0), `attribute "returns": must be a list`},
		{"returns empty", "nothing could succeed", with("returns", []any{}), `attribute "returns": must list at least one`},
		{"returns fraction", "codes are integers", with("returns", []any{json.Number("1.5")}), `attribute "returns": 1.5 is not an exit code`},
		{"returns out of range", "codes are 0 to 255", with("returns", []any{-1}), `attribute "returns": -1 is not an exit code`},
		{"refresh_only not bool", "true or false", with("refresh_only", "yes"), `attribute "refresh_only": must be true or false`},
		{"unknown attribute", "typos must not pass silently", with("creates_file", "/x"), `unknown attributes "creates_file"`},
		{"no name", "the id attribute", with("name", nil), `attribute "name": is required`},
		{"name differs from the id", "the id names the resource", with("name", "other"),
			`resource id names "greet", but attribute "name" is "other"`},
		{"purged, undo, no guard", "the undo would run on every deploy",
			raw(true, func(string) map[string]any { return map[string]any{"name": "greet", "undo": "echo >> ran.log"} }),
			`attribute "creates" (or "unless" or "onlyif") is required for "undo"`},
		{"purged, no undo, no guard", "a purge without undo does nothing",
			raw(true, func(string) map[string]any { return map[string]any{"name": "greet"} }), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			r := tc.r(dir)
			for _, dryRun := range []bool{true, false} {
				a := apply(t, r, dryRun)
				switch {
				case tc.want == "" && a.err != nil:
					t.Errorf("dry-run %t: refused: %v (%s)", dryRun, a.err, tc.reason)
				case tc.want == "":
				case a.err == nil:
					t.Errorf("dry-run %t: accepted (action %q), want an error containing %q (%s)", dryRun, a.out.Action, tc.want, tc.reason)
				case adapters.ClassOf(a.err) != adapters.ClassPermanent || !strings.Contains(a.err.Error(), tc.want):
					t.Errorf("dry-run %t: error %v (%s), want a permanent one containing %q (%s)",
						dryRun, a.err, adapters.ClassOf(a.err), tc.want, tc.reason)
				}
			}
			if tc.want != "" && ran(t, dir) != 0 {
				t.Errorf("a refused command ran")
			}
		})
	}
}

// TestObserveValidates: Observe refuses bad attributes by itself, since a
// wrapper around the handler may hide Validate from the engine.
func TestObserveValidates(t *testing.T) {
	t.Parallel()
	hc := adapters.NewContext()
	defer hc.Close()
	_, err := exec.Command{}.Observe(context.Background(), hc, command(map[string]any{"command": "true"}))
	if err == nil || adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), `"creates"`) {
		t.Fatalf("Observe of a command without a guard: %v, want a permanent error naming creates", err)
	}
}

// TestRegister: the type is registered under its name.
func TestRegister(t *testing.T) {
	t.Parallel()
	r := adapters.NewRegistry()
	exec.Register(r)
	if h, ok := r.Lookup("exec::Command"); !ok || h != (exec.Command{}) {
		t.Fatalf("Lookup(exec::Command) = %v, %t", h, ok)
	}
}
