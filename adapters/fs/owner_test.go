package fs_test

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
)

// ids returns the owner and group of path (not following a symlink).
func ids(t *testing.T, path string) (uid, gid uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

// daemonIDs returns the uid and gid of the user and group "daemon", which
// the tests use as an owner other than root.
func daemonIDs(t *testing.T) (uint32, uint32) {
	t.Helper()
	u, err := user.Lookup("daemon")
	if err != nil {
		t.Fatalf("the tests need a user named daemon: %v", err)
	}
	g, err := user.LookupGroup("daemon")
	if err != nil {
		t.Fatalf("the tests need a group named daemon: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(g.Gid)
	return uint32(uid), uint32(gid)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test changes file owners and must run as root (the test machines do)")
	}
}

// TestFileOwnership runs one file through owner and group changes in
// order: each step starts from the disk the previous one left.
func TestFileOwnership(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	duid, dgid := daemonIDs(t)
	path := filepath.Join(t.TempDir(), "owned")
	var inode os.FileInfo
	steps := []struct {
		name       string
		reason     string
		attrs      map[string]any
		wantAction adapters.Operation
		wantDiff   []string
		wantLogs   []string
		wantUID    uint32
		wantGID    uint32
		inPlace    bool
	}{
		{"create", "a new file gets its owner and group before it appears",
			map[string]any{"owner": "daemon", "group": "daemon"}, "create",
			[]string{"content", "group", "owner", "path"}, []string{"wrote file"}, duid, dgid, false},
		{"unchanged", "the names observed are the names desired",
			map[string]any{"owner": "daemon", "group": "daemon"}, "none", nil, nil, duid, dgid, false},
		{"numeric", "numeric ids are accepted and a change of owner alone is a chown in place",
			map[string]any{"owner": "0", "group": "0"}, "update",
			[]string{"group", "owner"}, []string{"updating file", "changed owner"}, 0, 0, true},
		{"same principal by name", `"root" and "0" are the same owner: nothing to do`,
			map[string]any{"owner": "root", "group": "root"}, "none", nil, nil, 0, 0, false},
		{"group only", "only the group is managed; the owner stays",
			map[string]any{"group": "daemon"}, "update",
			[]string{"group"}, []string{"updating file", "changed owner"}, 0, dgid, true},
		{"unmanaged", "without owner and group, whatever owns the file is right",
			map[string]any{}, "none", nil, nil, 0, dgid, false},
	}
	for _, s := range steps {
		attrs := map[string]any{"path": path, "content": "x\n"}
		for k, v := range s.attrs {
			attrs[k] = v
		}
		hc := adapters.NewContext()
		out, err := adapters.Run(context.Background(), fs.File{}, hc, file(attrs, false), false)
		if err != nil {
			t.Fatalf("%s (%s): %v", s.name, s.reason, err)
		}
		if out.Action != s.wantAction {
			t.Errorf("%s (%s): action %q, want %q (diff %v)", s.name, s.reason, out.Action, s.wantAction, out.Diff)
		}
		if got := out.Diff.Names(); !slices.Equal(got, s.wantDiff) && (len(got) > 0 || len(s.wantDiff) > 0) {
			t.Errorf("%s (%s): diff %v, want %v", s.name, s.reason, got, s.wantDiff)
		}
		if got := messages(hc); !slices.Equal(got, s.wantLogs) {
			t.Errorf("%s (%s): logs %q, want %q", s.name, s.reason, got, s.wantLogs)
		}
		if uid, gid := ids(t, path); uid != s.wantUID || gid != s.wantGID {
			t.Errorf("%s (%s): owner %d:%d, want %d:%d", s.name, s.reason, uid, gid, s.wantUID, s.wantGID)
		}
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if s.inPlace && !os.SameFile(fi, inode) {
			t.Errorf("%s (%s): the file was replaced, want a chown in place", s.name, s.reason)
		}
		inode = fi
	}
}

// TestRewriteKeepsUnmanagedOwner: a content change rewrites the file; an
// owner and group that are not managed must survive the rewrite.
func TestRewriteKeepsUnmanagedOwner(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	duid, dgid := daemonIDs(t)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, int(duid), int(dgid)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Lstat(path)
	if _, err := adapters.Run(context.Background(), fs.File{}, adapters.NewContext(),
		file(map[string]any{"path": path, "content": "new"}, false), false); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Lstat(path)
	if os.SameFile(before, after) {
		t.Fatalf("the file was written in place; this test needs a rewrite")
	}
	if uid, gid := ids(t, path); uid != duid || gid != dgid {
		t.Errorf("owner after rewrite %d:%d, want the replaced file's %d:%d", uid, gid, duid, dgid)
	}
	assertFile(t, path, "new", 0o640)
}

// TestObserveReportsOwnerNames: an owner other than the desired one is
// reported by name, or by number when the id has no name.
func TestObserveReportsOwnerNames(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	duid, dgid := daemonIDs(t)
	const nameless = 54321 // no user or group has this id on the test machines
	if _, err := user.LookupId(strconv.Itoa(nameless)); err == nil {
		t.Fatalf("setup: uid %d has a name on this machine", nameless)
	}
	cases := []struct {
		name      string
		reason    string
		uid, gid  int
		wantOwner string
		wantGroup string
	}{
		{"named", "an id with a name is reported by its name", int(duid), int(dgid), "daemon", "daemon"},
		{"nameless", "an id without a name is reported as a number", nameless, nameless, "54321", "54321"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(path, c.uid, c.gid); err != nil {
				t.Fatal(err)
			}
			obs, err := fs.File{}.Observe(context.Background(), adapters.NewContext(),
				file(map[string]any{"path": path, "content": "x", "owner": "root", "group": "0"}, false))
			if err != nil {
				t.Fatal(err)
			}
			if obs.Attributes["owner"] != c.wantOwner || obs.Attributes["group"] != c.wantGroup {
				t.Errorf("%s: observed %v:%v, want %s:%s", c.reason, obs.Attributes["owner"], obs.Attributes["group"],
					c.wantOwner, c.wantGroup)
			}
		})
	}
}

func TestOwnershipInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	cases := []struct {
		name    string
		reason  string
		attrs   map[string]any
		wantMsg string
	}{
		{"unknown user", "a name the host does not know cannot be set, and retrying will not create it",
			map[string]any{"owner": "intend-no-such-user"}, `attribute "owner": no user named "intend-no-such-user"`},
		{"unknown group", "the same for groups",
			map[string]any{"group": "intend-no-such-group"}, `attribute "group": no group named "intend-no-such-group"`},
		{"empty", "an empty owner is not a name", map[string]any{"owner": ""}, `attribute "owner"`},
		{"space", "a space is not part of a name", map[string]any{"owner": "a b"}, `attribute "owner"`},
		{"leading dash", "a name never starts with '-'", map[string]any{"group": "-x"}, `attribute "group"`},
		{"number", "an id is given as a string, so that JSON numbers are not guessed", map[string]any{"owner": 0.0}, `attribute "owner"`},
		{"minus one", "(uid_t)-1 means unchanged to chown", map[string]any{"owner": "4294967295"}, `attribute "owner"`},
		{"too large", "ids are 32 bits", map[string]any{"group": "99999999999"}, `attribute "group"`},
	}
	t.Run("refused", func(t *testing.T) { // the disk is checked after the group
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				for _, h := range []struct {
					name string
					h    adapters.Handler
					res  adapters.Resource
				}{
					{"file", fs.File{}, file(merge(map[string]any{"path": path, "content": "x"}, c.attrs), false)},
					{"directory", fs.Directory{}, directory(merge(map[string]any{"path": path}, c.attrs), false)},
				} {
					for _, dryRun := range []bool{true, false} {
						_, err := adapters.Run(context.Background(), h.h, adapters.NewContext(), h.res, dryRun)
						if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), c.wantMsg) {
							t.Errorf("%s %s (dry-run %t): error %v, want permanent %q", h.name, c.reason, dryRun, err, c.wantMsg)
						}
					}
				}
			})
		}
	})
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("invalid owners touched the disk: %v", err)
	}
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

// TestDirectoryOwnership: a directory gets its owner and group when it is
// created, an existing one is chowned in place, and a purge ignores owners.
func TestDirectoryOwnership(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	duid, dgid := daemonIDs(t)
	path := filepath.Join(t.TempDir(), "d")
	steps := []struct {
		name       string
		reason     string
		attrs      map[string]any
		purged     bool
		wantAction adapters.Operation
		wantLogs   []string
		wantUID    uint32
		wantGID    uint32
	}{
		{"create", "a new directory is chowned before its mode is set",
			map[string]any{"owner": "daemon", "group": strconv.Itoa(int(dgid)), "mode": "0750"}, false, "create",
			[]string{"changed owner", "created directory"}, duid, dgid},
		{"unchanged", "a numeric group observed as desired",
			map[string]any{"owner": "daemon", "group": strconv.Itoa(int(dgid)), "mode": "0750"}, false, "none", nil, duid, dgid},
		{"owner", "a change of owner alone is a chown",
			map[string]any{"owner": "root", "mode": "0750"}, false, "update",
			[]string{"updating directory", "changed owner"}, 0, dgid},
		{"purge with an unknown owner", "a purge does not need the owner to exist",
			map[string]any{"owner": "intend-no-such-user"}, true, "delete", []string{"removed directory"}, 0, 0},
	}
	for _, s := range steps {
		hc := adapters.NewContext()
		out, err := adapters.Run(context.Background(), fs.Directory{}, hc,
			directory(merge(map[string]any{"path": path}, s.attrs), s.purged), false)
		if err != nil {
			t.Fatalf("%s (%s): %v", s.name, s.reason, err)
		}
		if out.Action != s.wantAction {
			t.Errorf("%s (%s): action %q, want %q (diff %v)", s.name, s.reason, out.Action, s.wantAction, out.Diff)
		}
		if got := messages(hc); !slices.Equal(got, s.wantLogs) {
			t.Errorf("%s (%s): logs %q, want %q", s.name, s.reason, got, s.wantLogs)
		}
		if s.purged {
			if _, err := os.Lstat(path); !os.IsNotExist(err) {
				t.Errorf("%s: directory still there: %v", s.name, err)
			}
			continue
		}
		if uid, gid := ids(t, path); uid != s.wantUID || gid != s.wantGID {
			t.Errorf("%s (%s): owner %d:%d, want %d:%d", s.name, s.reason, uid, gid, s.wantUID, s.wantGID)
		}
		if perm := dirMode(t, path).Perm(); perm != 0o750 {
			t.Errorf("%s (%s): mode %04o, want 0750", s.name, s.reason, perm)
		}
	}
}
