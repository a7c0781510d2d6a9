package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
)

// pruneHistory exports five versions of files f0..f10 with changes in
// between; the membership rows it leaves are
//
//	f0, f3..f8  [1,-) x
//	f1          [1,2) x   [2,5) b   [5,-) c
//	f2          [1,4) x   [4,-) c
//	f9          [1,3) x   [5,-) x   (one content row for both)
//	f10         [5,-) x
func pruneHistory(t *testing.T, st *store.Store, envID string) {
	t.Helper()
	for _, v := range []intent.Version{
		files(t, 10, nil),
		files(t, 10, map[int]string{1: "b"}),
		files(t, 9, map[int]string{1: "b"}),
		files(t, 9, map[int]string{1: "b", 2: "c"}),
		files(t, 11, map[int]string{1: "c", 2: "c"}),
	} {
		if _, err := st.ExportVersion(context.Background(), envID, v); err != nil {
			t.Fatal(err)
		}
	}
}

// pruneContent names a content row by the membership row that brought it:
// resource fN's row starting at first.
type pruneContent struct {
	file  int
	first int64
}

func (c pruneContent) String() string { return fmt.Sprintf("f%d@%d", c.file, c.first) }

func TestPruneVersions(t *testing.T) {
	t.Parallel()
	release := func(vs ...int64) func(t *testing.T, st *store.Store, conn *pgx.Conn, envID string) {
		return func(t *testing.T, st *store.Store, conn *pgx.Conn, envID string) {
			for _, v := range vs {
				if _, err := st.ReleaseVersion(context.Background(), envID, v); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	tests := []struct {
		name string
		// setup runs after the five versions are exported.
		setup   func(t *testing.T, st *store.Store, conn *pgx.Conn, envID string)
		keep    int
		deleted int
		remain  []int64
		gone    []pruneContent
		kept    []pruneContent
		reason  string
	}{
		{name: "keep 2 of 5", keep: 2, deleted: 3, remain: []int64{4, 5},
			gone: []pruneContent{{1, 1}, {2, 1}}, kept: []pruneContent{{1, 2}, {9, 1}},
			reason: "v1-v3 go; f1's x and f2's x were only in them; f1's b is still in v4; f9's x is back in v5"},
		{name: "released version is kept", setup: release(2), keep: 2, deleted: 1, remain: []int64{2, 3, 4, 5},
			gone: []pruneContent{{1, 1}}, kept: []pruneContent{{2, 1}, {1, 2}},
			reason: "v2 is released: it and everything newer stay, only v1 goes"},
		{name: "deployed hash keeps content", setup: func(t *testing.T, st *store.Store, conn *pgx.Conn, envID string) {
			release(1)(t, st, conn, envID)
			if _, err := conn.Exec(context.Background(), `update resource_state set deployed_hash = intent_hash,
				last_result = 'deployed', compliance = 'compliant'`); err != nil {
				t.Fatal(err)
			}
			release(5)(t, st, conn, envID)
		}, keep: 1, deleted: 4, remain: []int64{5},
			gone: []pruneContent{{1, 2}}, kept: []pruneContent{{1, 1}, {2, 1}},
			reason: "v1's f1 and f2 were deployed and are still the deployed hash; f1's b was never deployed"},
		{name: "batch keeps content", setup: func(t *testing.T, st *store.Store, conn *pgx.Conn, envID string) {
			ctx := context.Background()
			if _, err := conn.Exec(ctx, `insert into deploy_runs (environment_id, run, version, action, reason, status, workflow_id)
				values ($1::uuid, 1, 1, 'deploy', 'test', 'done', 'w')`, envID); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `insert into deploy_batches (environment_id, run, seq, agent, level, resource_ids, hashes)
				select environment_id, 1, 0, agent, 0, array[resource_id], array[hash] from version_resources
				where resource_id = 'fs::File[h,path=/f1]' and first_version = 1`); err != nil {
				t.Fatal(err)
			}
		}, keep: 2, deleted: 3, remain: []int64{4, 5},
			gone: []pruneContent{{2, 1}}, kept: []pruneContent{{1, 1}},
			reason: "a deploy batch still names f1's x"},
		{name: "open dry-run keeps its version", setup: func(t *testing.T, st *store.Store, conn *pgx.Conn, envID string) {
			if _, err := st.CreateDryrun(context.Background(), envID, 2, nil, nil); err != nil {
				t.Fatal(err)
			}
		}, keep: 2, deleted: 1, remain: []int64{2, 3, 4, 5},
			gone: []pruneContent{{1, 1}}, kept: []pruneContent{{2, 1}},
			reason: "a pending dry-run of v2 will read v2's membership"},
		{name: "keep 0", keep: 0, remain: []int64{1, 2, 3, 4, 5},
			kept:   []pruneContent{{1, 1}, {2, 1}},
			reason: "keep <= 0 keeps everything"},
		{name: "keep all", keep: 5, remain: []int64{1, 2, 3, 4, 5},
			kept:   []pruneContent{{1, 1}, {2, 1}},
			reason: "there are not more versions than keep"},
		{name: "keep more", keep: 100, remain: []int64{1, 2, 3, 4, 5},
			reason: "there are fewer versions than keep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, _, conn := open(t)
			e := newEnv(t, st)
			ctx := context.Background()
			pruneHistory(t, st, e.ID)
			if tt.setup != nil {
				tt.setup(t, st, conn, e.ID)
			}
			hashes := contentHashes(t, conn)
			before := map[int64][]store.VersionResource{}
			for v := int64(1); v <= 5; v++ {
				rs, err := st.VersionResources(ctx, e.ID, v, "", 10000)
				if err != nil {
					t.Fatal(err)
				}
				before[v] = rs
			}
			untouched := snapshot(t, conn, "resource_state", "deploy_runs", "deploy_requests", "resource_actions", "agents")

			n, err := st.PruneVersions(ctx, e.ID, tt.keep)
			if err != nil {
				t.Fatalf("PruneVersions(keep %d): %v", tt.keep, err)
			}
			if n != tt.deleted {
				t.Errorf("PruneVersions(keep %d) deleted %d, want %d (%s)", tt.keep, n, tt.deleted, tt.reason)
			}
			vs, err := st.ListVersions(ctx, e.ID, 100)
			if err != nil {
				t.Fatal(err)
			}
			var remain []int64
			for _, v := range vs {
				remain = append(remain, v.Version)
			}
			slices.Sort(remain)
			if !slices.Equal(remain, tt.remain) {
				t.Errorf("versions left %v, want %v (%s)", remain, tt.remain, tt.reason)
			}
			for v := int64(1); v <= 5; v++ {
				if slices.Contains(tt.remain, v) {
					rs, err := st.VersionResources(ctx, e.ID, v, "", 10000)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(rs) != fmt.Sprint(before[v]) {
						t.Errorf("version %d reads back\n%v\nwant\n%v", v, rs, before[v])
					}
					continue
				}
				// VersionResources does not check that the version exists
				// (callers ask GetVersion first), so only that is checked.
				if _, err := st.GetVersion(ctx, e.ID, v); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("GetVersion(%d) of a deleted version: %v, want ErrNotFound", v, err)
				}
			}
			if after := snapshot(t, conn, "resource_state", "deploy_runs", "deploy_requests", "resource_actions", "agents"); after != untouched {
				t.Errorf("deploy state changed:\n%s\nwant\n%s", after, untouched)
			}
			if n := count(t, conn, `select count(*) from version_resources vr where not exists (
				select 1 from versions v where v.environment_id = vr.environment_id
				and v.version >= vr.first_version and (vr.last_version is null or v.version < vr.last_version))`); n != 0 {
				t.Errorf("%d membership rows hold no remaining version", n)
			}
			if n := count(t, conn, `select count(*) from resource_contents c
				where not exists (select 1 from version_resources vr where vr.hash = c.hash)
				  and not exists (select 1 from resource_state rs where c.hash in (rs.intent_hash, rs.deployed_hash))
				  and not exists (select 1 from deploy_batches b where c.hash = any(b.hashes))`); n != 0 {
				t.Errorf("%d contents are referenced by nothing", n)
			}
			for _, c := range tt.gone {
				if n := count(t, conn, `select count(*) from resource_contents where hash = $1`, hashes[c]); n != 0 {
					t.Errorf("pruneContent %s is still stored (%s)", c, tt.reason)
				}
			}
			for _, c := range tt.kept {
				if n := count(t, conn, `select count(*) from resource_contents where hash = $1`, hashes[c]); n != 1 {
					t.Errorf("pruneContent %s is gone (%s)", c, tt.reason)
				}
			}
		})
	}
}

func TestPruneVersionsUnknownEnvironment(t *testing.T) {
	t.Parallel()
	st, _, _ := open(t)
	_, err := st.PruneVersions(context.Background(), "00000000-0000-0000-0000-000000000001", 2)
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PruneVersions of an unknown environment: %v, want ErrNotFound", err)
	}
}

// TestPruneThenExportAndRelease checks that a pruned environment goes on
// working: a new version is exported against the remaining open rows,
// released, and diffed against the oldest remaining one.
func TestPruneThenExportAndRelease(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	pruneHistory(t, st, e.ID)
	if _, err := st.PruneVersions(ctx, e.ID, 1); err != nil {
		t.Fatal(err)
	}
	v6, err := st.ExportVersion(ctx, e.ID, files(t, 11, map[int]string{1: "x", 2: "c"}))
	if err != nil {
		t.Fatal(err)
	}
	if v6.Version != 6 || v6.ChangedCount != 1 {
		t.Errorf("v6 = %+v, want version 6 with 1 change (f1 back to x)", v6)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, 6); err != nil {
		t.Fatal(err)
	}
	d, err := st.DiffVersions(ctx, e.ID, 5, 6)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Modified) != 1 || d.Modified[0].ID != "fs::File[h,path=/f1]" || len(d.Added)+len(d.Removed) != 0 {
		t.Errorf("diff 5→6 = %+v, want f1 modified only", d)
	}
	if _, err := st.DiffVersions(ctx, e.ID, 4, 6); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("diff from pruned version 4: %v, want ErrNotFound", err)
	}
}

// contentHashes maps every membership row to its pruneContent hash.
func contentHashes(t *testing.T, conn *pgx.Conn) map[pruneContent][]byte {
	t.Helper()
	rows, err := conn.Query(context.Background(), `select resource_id, first_version, hash from version_resources`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[pruneContent][]byte{}
	for rows.Next() {
		var id string
		var c pruneContent
		var h []byte
		if err := rows.Scan(&id, &c.first, &h); err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscanf(id, "fs::File[h,path=/f%d]", &c.file); err != nil {
			t.Fatalf("resource id %q: %v", id, err)
		}
		out[c] = h
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// snapshot renders whole tables as text, to tell whether anything in them
// changed.
func snapshot(t *testing.T, conn *pgx.Conn, tables ...string) string {
	t.Helper()
	var b strings.Builder
	for _, table := range tables {
		var s string
		if err := conn.QueryRow(context.Background(), fmt.Sprintf(
			`select coalesce(string_agg(t::text, E'\n' order by t::text), '') from %s t`, table)).Scan(&s); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:\n%s\n", table, s)
	}
	return b.String()
}

// bigVersion builds a version of n files whose content is gen, except
// files lo <= i < hi, whose content is changed.
func bigVersion(tb testing.TB, n, lo, hi int, gen, changed string) intent.Version {
	tb.Helper()
	var b strings.Builder
	b.WriteString(`{"resources":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		c := gen
		if i >= lo && i < hi {
			c = changed
		}
		fmt.Fprintf(&b, `{"id":"fs::File[h,path=/f%d]","attributes":{"path":"/f%d","content":%q}}`, i, i, c)
	}
	b.WriteString(`]}`)
	v, err := intent.DecodeBytes([]byte(b.String()))
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// BenchmarkPruneVersions measures the steady state of keep_versions at
// 100,000 resources: each new version changes 1,000 of them and is
// released, and pruning to 2 versions deletes one version, 1,000
// membership rows and 1,000 contents. Each deleted content costs a
// foreign key check on version_resources by hash, which is only fast with
// an index on version_resources (environment_id, hash).
func BenchmarkPruneVersions(b *testing.B) {
	ctx := context.Background()
	st, _ := openStore(b)
	e := newEnv(b, st)
	const n, changes = 100_000, 1_000
	export := func(i int) {
		lo := (i * changes) % n
		v := bigVersion(b, n, lo, lo+changes, "x", fmt.Sprintf("v%d", i))
		info, err := st.ExportVersion(ctx, e.ID, v)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 3 {
		export(i)
	}
	if _, err := st.PruneVersions(ctx, e.ID, 2); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		export(3 + i)
		b.StartTimer()
		deleted, err := st.PruneVersions(ctx, e.ID, 2)
		if err != nil {
			b.Fatal(err)
		}
		if deleted != 1 {
			b.Fatalf("deleted %d versions, want 1", deleted)
		}
	}
}
