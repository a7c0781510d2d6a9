package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/api"
	iexec "github.com/intendhq/intend/internal/executor"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
)

// blob returns n pseudo-random bytes (seeded) and their digest.
func blob(n int, seed uint64) ([]byte, string) {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	sum := sha256.Sum256(b)
	return b, "sha256:" + hex.EncodeToString(sum[:])
}

// putArtifact uploads body under digest to env with token; length < 0
// sends it chunked (no Content-Length).
func (f *fixture) putArtifact(env, digest string, body []byte, token string, length int64) (int, map[string]any) {
	f.t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if length < 0 {
		rd = io.MultiReader(rd) // hides the length: sent chunked
	}
	req, err := http.NewRequest("PUT", f.srv.URL+"/api/v1/environments/"+env+"/artifacts/"+digest, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if length >= 0 {
		req.ContentLength = length
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	data, _ := io.ReadAll(resp.Body)
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			f.t.Fatalf("PUT artifact: %d %s", resp.StatusCode, data)
		}
	}
	return resp.StatusCode, out
}

// envOf reads an environment from the store.
func (f *fixture) envOf(name string) store.Environment {
	f.t.Helper()
	e, err := f.st.GetEnvironment(context.Background(), name)
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

// TestArtifactRoutesRoles: an author uploads (201, then 200 for the same
// digest), an operator or a reader cannot (403); HEAD tells an author
// whether it is stored; a reader lists it; an executor of the
// environment downloads it, an executor of another gets 404; every
// upload is in the audit trail with its digest and size.
func TestArtifactRoutesRoles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("alpha")
	f.env("beta")
	alpha, beta := f.envOf("alpha"), f.envOf("beta")
	author := f.newToken("author-alpha", "author", []string{alpha.ID})
	operator := f.newToken("operator-alpha", "operator", []string{alpha.ID})
	reader := f.newToken("reader-alpha", "read", []string{alpha.ID})
	data, digest := blob(3*store.ArtifactChunkSize/2, 1)

	for _, tok := range []string{operator, reader} {
		if code, p := f.putArtifact("alpha", digest, data, tok, int64(len(data))); code != 403 {
			t.Errorf("upload by a non-author = %d %v, want 403", code, p)
		}
	}
	code, p := f.putArtifact("alpha", digest, data, author, int64(len(data)))
	if code != 201 || p["digest"] != digest || p["size"] != float64(len(data)) || p["uploaded_by"] != "token:author-alpha" {
		t.Fatalf("upload = %d %v, want 201 with the artifact", code, p)
	}
	if code, p := f.putArtifact("alpha", digest, data, author, int64(len(data))); code != 200 {
		t.Errorf("second upload = %d %v, want 200", code, p)
	}
	if code, _ := f.callAs("HEAD", "/api/v1/environments/alpha/artifacts/"+digest, "", author, nil); code != 200 {
		t.Errorf("HEAD of a stored artifact = %d, want 200", code)
	}
	_, other := blob(10, 2)
	if code, _ := f.callAs("HEAD", "/api/v1/environments/alpha/artifacts/"+other, "", author, nil); code != 404 {
		t.Errorf("HEAD of an artifact never uploaded = %d, want 404", code)
	}
	if code, _ := f.callAs("HEAD", "/api/v1/environments/alpha/artifacts/"+digest, "", reader, nil); code != 403 {
		t.Errorf("HEAD by a reader = %d, want 403", code)
	}
	list := f.callAsOK(t, "GET", "/api/v1/environments/alpha/artifacts", reader)
	items, _ := list["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["digest"] != digest {
		t.Errorf("list = %v", list)
	}

	execAlpha, execBeta := executorToken(t, f, alpha, "a"), executorToken(t, f, beta, "a")
	ra, err := iexec.NewRemote(f.srv.URL, execAlpha, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ra.Artifact(context.Background(), "alpha", digest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("executor's download: %d bytes (%v), want the %d uploaded", len(got), err, len(data))
	}
	if _, err := ra.Artifact(context.Background(), "alpha", other); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("download of an artifact never uploaded: %v, want ErrNotFound", err)
	}
	rb, err := iexec.NewRemote(f.srv.URL, execBeta, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rb.Artifact(context.Background(), "alpha", digest); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("beta's executor downloading alpha's artifact: %v, want ErrNotFound (404)", err)
	}
	if _, err := rb.Artifact(context.Background(), "beta", digest); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("beta's executor downloading alpha's digest from beta: %v, want ErrNotFound", err)
	}
	if code, _ := f.callAs("GET", "/api/v1/environments/alpha/executor/artifacts/"+digest, "", author, nil); code != 403 {
		t.Errorf("an author on the executor route = %d, want 403", code)
	}

	rows, err := f.st.ListAudit(context.Background(), store.AuditFilter{EnvironmentID: alpha.ID, Action: "artifact.upload", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var stored, refused int
	for _, r := range rows {
		var d map[string]any
		_ = json.Unmarshal(r.Detail, &d)
		if r.Status != 403 && (d["digest"] != digest || d["size"] != float64(len(data))) {
			t.Errorf("audit row %+v: detail %s, want digest and size", r, r.Detail)
		}
		switch r.Status {
		case 201, 200:
			stored++
		case 403:
			refused++
		}
	}
	if stored != 2 || refused < 1 {
		t.Errorf("audit: %d uploads and %d refusals recorded, want 2 and the refusals (%d rows)", stored, refused, len(rows))
	}
}

// callAsOK is callAs wanting 200.
func (f *fixture) callAsOK(t *testing.T, method, path, token string) map[string]any {
	t.Helper()
	code, out := f.callAs(method, path, "", token, nil)
	if code != 200 {
		t.Fatalf("%s %s = %d %v", method, path, code, out)
	}
	return out
}

// TestArtifactUploadRefusals: a body under another digest is a 422
// naming both; one over the server's max_artifact_size is a 413 before
// it is read (Content-Length) or as soon as it passes it (chunked); one
// over the environment's artifact_quota a 413 naming the quota, which
// only a global admin changes; nothing refused is kept, and the
// refusals are audited.
func TestArtifactUploadRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{MaxArtifactSize: 2 * store.ArtifactChunkSize})
	f.env("refuse")
	e := f.envOf("refuse")
	author := f.newToken("author-refuse", "author", []string{e.ID})

	data, digest := blob(store.ArtifactChunkSize+10, 3)
	_, other := blob(10, 4)
	code, p := f.putArtifact("refuse", other, data, author, int64(len(data)))
	if code != 422 || !strings.Contains(fmt.Sprint(p["detail"]), digest) || !strings.Contains(fmt.Sprint(p["detail"]), other) {
		t.Errorf("upload under another digest = %d %v, want 422 naming %s and %s", code, p, digest, other)
	}

	big, bigDigest := blob(3*store.ArtifactChunkSize, 5)
	for _, length := range []int64{int64(len(big)), -1} {
		code, p := f.putArtifact("refuse", bigDigest, big, author, length)
		if code != 413 || !strings.Contains(fmt.Sprint(p["detail"]), "max_artifact_size of 2097152 bytes") {
			t.Errorf("upload of 3 MiB (length %d) over a limit of 2 = %d %v, want 413 naming max_artifact_size", length, code, p)
		}
	}
	if code, p := f.putArtifact("refuse", "sha256:ABC", data, author, int64(len(data))); code != 400 {
		t.Errorf("upload under a malformed digest = %d %v, want 400", code, p)
	}

	envAdmin := f.newToken("admin-refuse", "admin", []string{e.ID})
	if code, p := f.callAs("PATCH", "/api/v1/environments/refuse", `{"settings":{"artifact_quota":100000000}}`, envAdmin, nil); code != 403 {
		t.Errorf("artifact_quota set by the environment's admin = %d %v, want 403", code, p)
	}
	f.mustCall("PATCH", "/api/v1/environments/refuse", fmt.Sprintf(`{"settings":{"artifact_quota":%d}}`, 2*store.ArtifactChunkSize), 200)
	if code, p := f.putArtifact("refuse", digest, data, author, int64(len(data))); code != 201 {
		t.Fatalf("upload within the quota = %d %v", code, p)
	}
	more, moreDigest := blob(store.ArtifactChunkSize, 6)
	for _, length := range []int64{int64(len(more)), -1} {
		code, p = f.putArtifact("refuse", moreDigest, more, author, length)
		if code != 413 || !strings.Contains(fmt.Sprint(p["detail"]), "artifact_quota of 2097152 bytes") {
			t.Errorf("upload over the quota (length %d) = %d %v, want 413 naming artifact_quota", length, code, p)
		}
	}
	list := f.mustCall("GET", "/api/v1/environments/refuse/artifacts", "", 200)
	if items, _ := list["items"].([]any); len(items) != 1 {
		t.Errorf("artifacts after the refusals = %v, want the one stored", list)
	}
	rows, err := f.st.ListAudit(context.Background(), store.AuditFilter{EnvironmentID: e.ID, Action: "artifact.upload", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[int]bool{}
	for _, r := range rows {
		statuses[r.Status] = true
	}
	if !statuses[422] || !statuses[413] || !statuses[201] {
		t.Errorf("audited upload statuses %v, want 201, 413 and 422", statuses)
	}
}

// discard is a ResponseWriter that keeps nothing of the body.
type discard struct {
	h    http.Header
	code int
	n    int64
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(code int)        { d.code = code }
func (d *discard) Write(p []byte) (int, error) { d.n += int64(len(p)); return len(p), nil }

// TestArtifactTransfersStream: uploading and downloading an artifact of
// 20 MiB allocates a few chunks' worth of memory in the server, not the
// artifact: bodies stream a chunk at a time.
func TestArtifactTransfersStream(t *testing.T) {
	f := newFixture(t, api.Options{})
	f.env("stream")
	e := f.envOf("stream")
	execTok := executorToken(t, f, e, "a")
	const size = 20 << 20
	data, digest := blob(size, 7)

	measure := func(req *http.Request) (*discard, uint64) {
		w := &discard{h: http.Header{}}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f.handler.ServeHTTP(w, req)
		runtime.ReadMemStats(&after)
		return w, after.TotalAlloc - before.TotalAlloc
	}
	up, _ := http.NewRequest("PUT", "/api/v1/environments/stream/artifacts/"+digest, bytes.NewReader(data))
	up.Header.Set("Authorization", "Bearer "+f.token)
	up.Header.Set("Content-Type", "application/octet-stream")
	w, upAlloc := measure(up)
	if w.code != 201 {
		t.Fatalf("upload = %d", w.code)
	}
	down, _ := http.NewRequest("GET", "/api/v1/environments/stream/executor/artifacts/"+digest, nil)
	down.Header.Set("Authorization", "Bearer "+execTok)
	w, downAlloc := measure(down)
	if w.code != 200 || w.n != size {
		t.Fatalf("download = %d, %d bytes", w.code, w.n)
	}
	t.Logf("20 MiB artifact: the server allocated %.1f MiB to upload it, %.1f MiB to download it",
		float64(upAlloc)/(1<<20), float64(downAlloc)/(1<<20))
	// A chunk is 1 MiB; a copy of the artifact would be 20.
	const bound = 8 << 20
	if upAlloc > bound || downAlloc > bound {
		t.Errorf("allocated %d bytes to upload and %d to download 20 MiB, want under %d each", upAlloc, downAlloc, bound)
	}
}

// pluginsJSON is a plugins member serving kv::Entry with digest.
func pluginsJSON(digest string) string {
	return `"plugins":[{"name":"kv","module":"kv","version":"v1.0.0","runtime":"exec","types":["kv::Entry"],` +
		`"artifacts":{"linux/amd64":"` + digest + `"}}]`
}

// TestExportPlugins: an export carries its plugins, checked (422 naming
// each bad entry: name, runtime, type, a type served twice, platform,
// digest, an artifact not stored); GET .../versions/{v} shows them; a
// partial export keeps its base's unless it names its own; the artifact
// list names the versions that require each.
func TestExportPlugins(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("plug")
	data, digest := blob(100, 8)
	_, absent := blob(100, 9)
	if code, p := f.putArtifact("plug", digest, data, f.token, int64(len(data))); code != 201 {
		t.Fatalf("upload = %d %v", code, p)
	}
	res := `{"id":"kv::Entry[a,key=x]","attributes":{"key":"x","value":"1"}}`
	export := func(plugins string) string {
		return `{"resources":[` + res + `],` + plugins + `}`
	}
	p0 := func(name, runtime, types, artifacts string) string {
		return `{"name":"` + name + `","runtime":"` + runtime + `","types":` + types + `,"artifacts":` + artifacts + `}`
	}
	ok := `{"linux/amd64":"` + digest + `"}`
	cases := []struct{ why, plugins, field, detail string }{
		{"a bad name", `"plugins":[` + p0("KV!", "exec", `["kv::Entry"]`, ok) + `]`, "/plugins/0/name", "is not a plugin name"},
		{"a bad runtime", `"plugins":[` + p0("kv", "java", `["kv::Entry"]`, ok) + `]`, "/plugins/0/runtime", "is not a runtime"},
		{"a bad type", `"plugins":[` + p0("kv", "exec", `["Entry"]`, ok) + `]`, "/plugins/0/types/0", "is not a resource type"},
		{"a type twice", `"plugins":[` + p0("kv", "exec", `["kv::Entry"]`, ok) + `,` + p0("kv2", "exec", `["kv::Entry"]`, ok) + `]`,
			"/plugins/1/types/0", "served by plugins kv and kv2"},
		{"a bad platform", `"plugins":[` + p0("kv", "exec", `["kv::Entry"]`, `{"linux":"`+digest+`"}`) + `]`,
			"/plugins/0/artifacts/linux", "is not a platform"},
		{"any for exec", `"plugins":[` + p0("kv", "exec", `["kv::Entry"]`, `{"any":"`+digest+`"}`) + `]`,
			"/plugins/0/artifacts/any", "python3 plugin only"},
		{"a bad digest", `"plugins":[` + p0("kv", "exec", `["kv::Entry"]`, `{"linux/amd64":"sha256:AB"}`) + `]`,
			"/plugins/0/artifacts/linux~1amd64", "is not a digest"},
		{"an artifact not stored", `"plugins":[` + p0("kv", "exec", `["kv::Entry"]`, `{"linux/amd64":"`+absent+`"}`) + `]`,
			"/plugins/0/artifacts/linux~1amd64", "plugin kv: artifact " + absent + " (linux/amd64) is not stored"},
		{"an unknown member", `"plugins":[{"name":"kv","runtime":"exec","types":["kv::Entry"],"artifacts":` + ok + `,"x":1}]`,
			"/plugins", "unknown field"},
	}
	for _, c := range cases {
		for _, route := range []string{"/versions", "/versions/partial"} {
			code, p := f.call("PUT", "/api/v1/environments/plug"+route, export(c.plugins))
			if code != 422 || !problemNames(p, c.field, c.detail) {
				t.Errorf("%s (PUT %s) = %d %v, want 422 naming %s: %q", c.why, route, code, p, c.field, c.detail)
			}
		}
	}
	if v := f.mustCall("GET", "/api/v1/environments/plug", "", 200)["last_version"]; v != float64(0) {
		t.Fatalf("last_version = %v after refused exports, want 0", v)
	}

	v1 := f.mustCall("PUT", "/api/v1/environments/plug/versions", export(pluginsJSON(digest)), 201)["version"]
	plugins := func(v any) string {
		t.Helper()
		got := f.mustCall("GET", fmt.Sprintf("/api/v1/environments/plug/versions/%v", v), "", 200)["plugins"]
		b, _ := json.Marshal(got)
		return string(b)
	}
	want := `[{"artifacts":{"linux/amd64":"` + digest + `"},"module":"kv","name":"kv","runtime":"exec","types":["kv::Entry"],"version":"v1.0.0"}]`
	if got := plugins(v1); got != want {
		t.Errorf("version %v's plugins = %s, want %s", v1, got, want)
	}
	// A partial export without plugins keeps the base version's.
	v2 := f.mustCall("PUT", "/api/v1/environments/plug/versions/partial",
		`{"resources":[{"id":"kv::Entry[a,key=y]","attributes":{"key":"y"},"resource_set":"s"}]}`, 201)["version"]
	if got := plugins(v2); got != want {
		t.Errorf("partial version %v's plugins = %s, want the base's %s", v2, got, want)
	}
	// One with "plugins": [] has none.
	v3 := f.mustCall("PUT", "/api/v1/environments/plug/versions/partial",
		`{"resources":[{"id":"kv::Entry[a,key=z]","attributes":{"key":"z"},"resource_set":"t"}],"plugins":[]}`, 201)["version"]
	if got := plugins(v3); got != `[]` {
		t.Errorf("partial version %v with plugins [] = %s, want []", v3, got)
	}
	// A full export without plugins has none.
	v4 := f.mustCall("PUT", "/api/v1/environments/plug/versions", version(res), 201)["version"]
	if got := plugins(v4); got != `[]` {
		t.Errorf("version %v without plugins = %s, want []", v4, got)
	}
	items := f.mustCall("GET", "/api/v1/environments/plug/artifacts", "", 200)["items"].([]any)
	if vs := fmt.Sprint(items[0].(map[string]any)["versions"]); vs != fmt.Sprint([]any{v1, v2}) {
		t.Errorf("versions requiring the artifact = %s, want [%v %v]", vs, v1, v2)
	}
}

// TestExportRefusesUnlistedPlugins: a confined environment's export
// requiring a plugin whose artifact allowed_plugins does not list is a
// 422 naming the plugin and the digest; listed, it is taken.
// allowed_plugins is a global admin's, and holds digests only.
func TestExportRefusesUnlistedPlugins(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("plug-conf")
	e := f.envOf("plug-conf")
	data, digest := blob(100, 10)
	if code, p := f.putArtifact("plug-conf", digest, data, f.token, int64(len(data))); code != 201 {
		t.Fatalf("upload = %d %v", code, p)
	}
	f.mustCall("PATCH", "/api/v1/environments/plug-conf", `{"settings":{"allowed_paths":["/srv/a"]}}`, 200)
	body := `{"resources":[{"id":"kv::Entry[a,key=x]","attributes":{"key":"x"}}],` + pluginsJSON(digest) + `}`
	for _, route := range []string{"/versions", "/versions/partial"} {
		code, p := f.call("PUT", "/api/v1/environments/plug-conf"+route, body)
		if code != 422 || !problemNames(p, "/plugins/0/artifacts/linux~1amd64", "plugin kv: artifact "+digest+" is not in the environment's allowed_plugins []") {
			t.Errorf("PUT %s of an unlisted plugin in a confined environment = %d %v, want 422 naming it", route, code, p)
		}
	}
	envAdmin := f.newToken("admin-plug-conf", "admin", []string{e.ID})
	if code, p := f.callAs("PATCH", "/api/v1/environments/plug-conf", `{"settings":{"allowed_plugins":["`+digest+`"]}}`, envAdmin, nil); code != 403 {
		t.Errorf("allowed_plugins set by the environment's admin = %d %v, want 403", code, p)
	}
	for _, bad := range []string{`["sha256:AB"]`, `["kv"]`, `"` + digest + `"`} {
		code, p := f.call("PATCH", "/api/v1/environments/plug-conf", `{"settings":{"allowed_plugins":`+bad+`}}`)
		if code != 422 || !problemNames(p, "/settings/allowed_plugins", "digest") {
			t.Errorf("allowed_plugins %s = %d %v, want 422", bad, code, p)
		}
	}
	f.mustCall("PATCH", "/api/v1/environments/plug-conf", `{"settings":{"allowed_plugins":["`+digest+`"]}}`, 200)
	f.mustCall("PUT", "/api/v1/environments/plug-conf/versions", body, 201)
}

// TestBatchCarriesPlugins: a batch carries its version's plugins, loaded
// by the embedded path (the store's ledger) and by an executor on
// another host (Remote); in a confined environment, the resources of a
// plugin allowed_plugins does not list (any more) are withheld, recorded
// failed naming the plugin and the digest.
func TestBatchCarriesPlugins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, api.Options{})
	f.env("plug-batch")
	e := f.envOf("plug-batch")
	data, digest := blob(100, 11)
	if code, p := f.putArtifact("plug-batch", digest, data, f.token, int64(len(data))); code != 201 {
		t.Fatalf("upload = %d %v", code, p)
	}
	v, err := intent.DecodeBytes([]byte(`{"resources":[{"id":"kv::Entry[a,key=x]","attributes":{"key":"x"}},` +
		`{"id":"fs::File[a,path=/srv/a/f]","attributes":{"path":"/srv/a/f"}}],` + pluginsJSON(digest) + `}`))
	if err != nil {
		t.Fatal(err)
	}
	info, err := f.st.ExportVersion(ctx, e.ID, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
		t.Fatal(err)
	}
	take, err := f.st.TakeRequests(ctx, e.ID, "test-plug-batch", nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take: %+v %v", take, err)
	}
	plan, err := f.st.PlanDeploy(ctx, e.ID, take.Run.Run, store.BatchLimits{MaxResources: 1000}, store.Caller{})
	if err != nil || len(plan.Batches) != 1 {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	seq := plan.Batches[0].Seq
	remote, err := iexec.NewRemote(f.srv.URL, executorToken(t, f, e, "a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.Plugin{{Name: "kv", Module: "kv", Version: "v1.0.0", Runtime: "exec", Types: []string{"kv::Entry"},
		Artifacts: map[string]string{"linux/amd64": digest}}}
	same := func(a, b []ledger.Plugin) bool {
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return string(x) == string(y)
	}
	for name, l := range map[string]ledger.Ledger{"store": f.st.Ledger(), "remote": remote} {
		b, err := l.LoadBatch(ctx, e.ID, take.Run.Run, seq, "")
		if err != nil {
			t.Fatal(err)
		}
		if !same(b.Plugins, want) {
			t.Errorf("%s: batch plugins = %+v, want %+v", name, b.Plugins, want)
		}
		rc, err := l.Artifact(ctx, e.ID, digest)
		if err != nil {
			t.Fatalf("%s: artifact: %v", name, err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, data) {
			t.Errorf("%s: artifact = %d bytes, want the %d uploaded", name, len(got), len(data))
		}
	}

	// Confined after the export: the plugin's resource is withheld.
	f.mustCall("PATCH", "/api/v1/environments/plug-batch", `{"settings":{"allowed_paths":["/srv/a"]}}`, 200)
	b, err := remote.LoadBatch(ctx, e.ID, take.Run.Run, seq, "")
	if err != nil {
		t.Fatal(err)
	}
	out, ok := b.Recorded["kv::Entry[a,key=x]"]
	if !ok || out.ErrorClass != "permanent" || !strings.Contains(out.Error, "plugin kv: artifact "+digest+" is not in the environment's allowed_plugins") {
		t.Errorf("recorded = %+v, want kv::Entry failed naming the plugin", b.Recorded)
	}
	if _, ok := b.Recorded["fs::File[a,path=/srv/a/f]"]; ok {
		t.Errorf("fs::File inside allowed_paths recorded as refused: %+v", b.Recorded)
	}
	i := slices.IndexFunc(b.Resources, func(r ledger.Resource) bool { return r.ID == "kv::Entry[a,key=x]" })
	if i < 0 || string(b.Resources[i].Attributes) != `{}` {
		t.Errorf("the refused resource's attributes were handed out: %+v", b.Resources)
	}
	// Nor is the plugin: an executor that would start it has no digest.
	if len(b.Plugins) != 0 {
		t.Errorf("the refused plugin is handed out: %+v", b.Plugins)
	}
}

// TestArtifactUploadsCannotTakeThePool: an upload holds a database
// connection (its transaction) while its body arrives, for up to the bulk
// body deadline (10 minutes). Authors who start more slow uploads than
// the server's pool has connections (8 here) must not stall every other
// request: a server takes MaxArtifactUploads at once (2 by default), an
// environment one, and answers 429 beyond (review of issue 30: nine
// trickled uploads held the pool and a plain GET waited for it).
func TestArtifactUploadsCannotTakeThePool(t *testing.T) {
	f := newFixture(t, api.Options{})
	const n = 9
	type upload struct {
		pw      *io.PipeWriter
		answer  chan int
		problem chan string
	}
	for i := range n {
		f.env(fmt.Sprintf("pool%d", i))
	}
	ups := make([]upload, n)
	for i := range ups {
		env := fmt.Sprintf("pool%d", i)
		_, digest := blob(10, uint64(100+i))
		pr, pw := io.Pipe()
		u := upload{pw: pw, answer: make(chan int, 1), problem: make(chan string, 1)}
		ups[i] = u
		req, err := http.NewRequest("PUT", f.srv.URL+"/api/v1/environments/"+env+"/artifacts/"+digest, pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Authorization", "Bearer "+f.token)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				u.answer <- 0
				u.problem <- err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			u.answer <- resp.StatusCode
			u.problem <- string(b)
		}()
		// The first bytes, then nothing: a slow client.
		go func() { _, _ = pw.Write(bytes.Repeat([]byte{'x'}, 1024)) }()
	}
	t.Cleanup(func() {
		for _, u := range ups {
			u.pw.CloseWithError(errors.New("test over"))
		}
	})
	// Until the uploads are in their transactions (COPY) or answered: as
	// many as the pool has connections (8) or all of them.
	conn, err := pgx.Connect(context.Background(), f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	copying := func() int {
		var c int
		if err := conn.QueryRow(context.Background(), `select count(*) from pg_stat_activity
			where datname = current_database() and state <> 'idle' and query like 'copy artifact_chunks%'`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	answers := map[int]int{}
	got := make([]bool, n)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for i, u := range ups {
			if got[i] {
				continue
			}
			select {
			case code := <-u.answer:
				got[i] = true
				answers[code]++
				if p := <-u.problem; code != 429 || !strings.Contains(p, "artifact uploads at once") {
					t.Errorf("upload %d answered %d %s, want 429 naming the server's artifact uploads", i, code, p)
				}
			default:
			}
		}
		if c := copying(); c+answers[429] >= n || c >= 8 {
			break
		}
	}
	t.Logf("uploads in COPY: %d; answers: %v", copying(), answers)
	holder := -1 // an upload being read
	for i := range ups {
		if !got[i] {
			holder = i
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/api/v1/environments/pool0/versions", nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET .../versions while %d uploads trickle: %v (answers %v): the uploads hold the database pool", n, err, answers)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET .../versions = %d", resp.StatusCode)
	}
	if answers[429] != n-2 {
		t.Errorf("answers %v: want %d uploads refused 429, 2 taken", answers, n-2)
	}

	// A second upload into an environment that has one under way.
	if holder < 0 {
		t.Fatal("no upload is being read")
	}
	env := fmt.Sprintf("pool%d", holder)
	data, digest := blob(10, 99)
	code, p := f.putArtifact(env, digest, data, f.token, int64(len(data)))
	if code != 429 || !strings.Contains(fmt.Sprint(p["detail"]), env+" has an artifact upload under way") {
		t.Errorf("a second upload into %s = %d %v, want 429 naming the one under way", env, code, p)
	}
}

// TestExportRefusesPluginsOfBuiltinTypes: a version's plugin may not
// serve a type of intend's built-in adapters (fs::File, exec::Command,
// …): the executor runs a type a plugin serves through the plugin, so a
// module's plugin that declared fs::File would receive every fs::File of
// the model, their secrets resolved by the executor included (review of
// issue 30). 422 naming the type, for a full and a partial export.
func TestExportRefusesPluginsOfBuiltinTypes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("plug-builtin")
	data, digest := blob(100, 11)
	if code, p := f.putArtifact("plug-builtin", digest, data, f.token, int64(len(data))); code != 201 {
		t.Fatalf("upload = %d %v", code, p)
	}
	for _, typ := range []string{"fs::File", "exec::Command", "ssh::File", "rest::Object", "netconf::Config", "postgres::Database", "fs::Anything"} {
		body := `{"resources":[{"id":"kv::Entry[a,key=x]","attributes":{"key":"x"}}],` +
			strings.Replace(pluginsJSON(digest), `"types":["kv::Entry"]`, `"types":["kv::Entry","`+typ+`"]`, 1) + `}`
		for _, route := range []string{"/versions", "/versions/partial"} {
			code, p := f.call("PUT", "/api/v1/environments/plug-builtin"+route, body)
			if code != 422 || !problemNames(p, "/plugins/0/types/1", "built-in") {
				t.Errorf("PUT %s of a plugin serving %s = %d %v, want 422 naming /plugins/0/types/1", route, typ, code, p)
			}
		}
	}
}

// TestArtifactDelete: an author deletes an artifact no version requires
// (204; then 404, and it no longer counts against the quota); one a
// version requires is a 409 naming the version; an operator cannot
// (403); deletes are audited with the digest.
func TestArtifactDelete(t *testing.T) {
	t.Parallel()
	quota := int64(store.MinArtifactCharge * 2)
	f := newFixture(t, api.Options{})
	f.env("del")
	e := f.envOf("del")
	f.mustCall("PATCH", "/api/v1/environments/del", fmt.Sprintf(`{"settings":{"artifact_quota":%d}}`, quota), 200)
	author := f.newToken("author-del", "author", []string{e.ID})
	operator := f.newToken("operator-del", "operator", []string{e.ID})
	used, usedDigest := blob(100, 20)
	spare, spareDigest := blob(100, 21)
	third, thirdDigest := blob(100, 22)
	for _, b := range []struct {
		data   []byte
		digest string
	}{{used, usedDigest}, {spare, spareDigest}} {
		if code, p := f.putArtifact("del", b.digest, b.data, author, int64(len(b.data))); code != 201 {
			t.Fatalf("upload = %d %v", code, p)
		}
	}
	// The quota holds two artifacts: a third is refused.
	if code, p := f.putArtifact("del", thirdDigest, third, author, int64(len(third))); code != 413 {
		t.Fatalf("third upload = %d %v, want 413 over the quota", code, p)
	}
	if code, p := f.call("PUT", "/api/v1/environments/del/versions",
		`{"resources":[{"id":"kv::Entry[a,key=x]","attributes":{"key":"x","value":"1"}}],`+pluginsJSON(usedDigest)+`}`); code != 200 && code != 201 {
		t.Fatalf("export = %d %v", code, p)
	}
	path := func(d string) string { return "/api/v1/environments/del/artifacts/" + d }
	if code, p := f.callAs("DELETE", path(spareDigest), "", operator, nil); code != 403 {
		t.Errorf("delete by an operator = %d %v, want 403", code, p)
	}
	if code, p := f.callAs("DELETE", path(usedDigest), "", author, nil); code != 409 || !strings.Contains(fmt.Sprint(p["detail"]), "[1]") {
		t.Errorf("delete of an artifact version 1 requires = %d %v, want 409 naming version 1", code, p)
	}
	if code, p := f.callAs("DELETE", path(spareDigest), "", author, nil); code != 204 {
		t.Fatalf("delete = %d %v, want 204", code, p)
	}
	if code, _ := f.callAs("HEAD", path(spareDigest), "", author, nil); code != 404 {
		t.Errorf("HEAD after the delete = %d, want 404", code)
	}
	if code, p := f.callAs("DELETE", path(spareDigest), "", author, nil); code != 404 {
		t.Errorf("second delete = %d %v, want 404", code, p)
	}
	// Its share of the quota is free again.
	if code, p := f.putArtifact("del", thirdDigest, third, author, int64(len(third))); code != 201 {
		t.Errorf("upload after the delete = %d %v, want 201", code, p)
	}
	rows, err := f.st.ListAudit(context.Background(), store.AuditFilter{EnvironmentID: e.ID, Action: "artifact.delete", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for _, r := range rows {
		var d map[string]any
		_ = json.Unmarshal(r.Detail, &d)
		if r.Status == 204 && d["digest"] == spareDigest {
			deleted++
		}
	}
	if deleted != 1 {
		t.Errorf("audit: %d deletes of %s recorded, want 1 (%d rows)", deleted, spareDigest, len(rows))
	}
}
