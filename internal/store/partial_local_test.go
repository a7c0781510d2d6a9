package store_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
)

// TestExportPartialMatchesWholeMerge checks that a partial export, which
// reads only the part of the newest version it touches, makes the version
// that merging it into the whole newest version makes (intent.MergePartial
// over every stored resource, which is what the store did before), and
// refuses what that merge refuses, with the same problems: random partial
// exports, some of them wrong on purpose (requires across sets, into
// removed sets or nowhere, cycles, changed shared resources, resources
// moving sets).
func TestExportPartialMatchesWholeMerge(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	partialBase(t, st, e.ID)
	rng := rand.New(rand.NewPCG(14, 18))
	sets := []string{"a", "b", "c", "d", "e"}
	path := func(set string, i int) string {
		if set == "" {
			return fmt.Sprintf("/s%d", i)
		}
		return fmt.Sprintf("/%s%d", set, i)
	}
	accepted, refused := 0, 0
	for step := range 150 {
		set := sets[rng.IntN(len(sets))]
		var objs []string
		n := rng.IntN(5)
		for i := 1; i <= n; i++ {
			var reqs []string
			for range rng.IntN(3) {
				switch k := rng.IntN(10); {
				case k < 4:
					reqs = append(reqs, path(set, 1+rng.IntN(n)))
				case k < 8:
					reqs = append(reqs, path("", 1+rng.IntN(3)))
				case k < 9:
					reqs = append(reqs, path(sets[rng.IntN(len(sets))], 1+rng.IntN(3)))
				default:
					reqs = append(reqs, path("", 9))
				}
			}
			slices.Sort(reqs)
			reqs = slices.Compact(reqs)
			reqs = slices.DeleteFunc(reqs, func(r string) bool { return r == path(set, i) })
			rs := set
			if rng.IntN(40) == 0 {
				rs = sets[rng.IntN(len(sets))] // a resource that moves set, or a second set
			}
			objs = append(objs, setRes(path(set, i), rs, fmt.Sprintf("c%d", rng.IntN(3)), reqs...))
		}
		if rng.IntN(4) == 0 {
			content := "x"
			if rng.IntN(5) == 0 {
				content = "changed"
			}
			objs = append(objs, setRes(path("", 1+rng.IntN(4)), "", content))
		}
		var removed []string
		if rng.IntN(5) == 0 {
			if r := sets[rng.IntN(len(sets))]; r != set || n == 0 {
				removed = []string{r}
			}
		}
		if len(objs) == 0 && removed == nil {
			removed = []string{set}
		}

		env, err := st.GetEnvironment(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		base, whole := storedVersion(t, st, e.ID, env.LastVersion)
		p, _, err := intent.DecodePartial([]byte(`{"resources":[` + strings.Join(objs, ",") + `]}`))
		if err != nil {
			continue // wrong in itself: the store never sees it
		}
		want, wantErr := intent.MergePartial(base, p, removed)
		got, err := st.ExportPartial(ctx, e.ID, p, removed)
		if wantErr != nil {
			var ve, wantVE *intent.ValidationError
			if !errors.As(err, &ve) || !errors.As(wantErr, &wantVE) {
				t.Fatalf("step %d: ExportPartial(%s, removed %q) = %v; want the whole merge's refusal %v", step, objs, removed, err, wantErr)
			}
			if !slices.Equal(ve.Problems, wantVE.Problems) {
				t.Errorf("step %d: problems %q; the whole merge has %q", step, ve.Problems, wantVE.Problems)
			}
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("step %d: ExportPartial(%s, removed %q) = %v; the whole merge accepts it", step, objs, removed, err)
		}
		wantHashes := map[string]string{}
		for _, r := range want.Resources {
			wantHashes[r.ID.String()] = fmt.Sprintf("%x", r.Hash())
		}
		for _, k := range want.Kept {
			wantHashes[k.ID.String()] = fmt.Sprintf("%x", k.Hash)
		}
		_, gotHashes := storedVersion(t, st, e.ID, got.Version)
		if !maps.Equal(gotHashes, wantHashes) {
			t.Fatalf("step %d: version %d holds\n%q\nthe whole merge of version %d makes\n%q", step, got.Version, gotHashes, env.LastVersion, wantHashes)
		}
		if got.ResourceCount != len(wantHashes) {
			t.Errorf("step %d: version %d counts %d resources; it holds %d", step, got.Version, got.ResourceCount, len(wantHashes))
		}
		changed := 0
		for id, h := range wantHashes {
			if whole[id] != h {
				changed++
			}
		}
		for id := range whole {
			if _, ok := wantHashes[id]; !ok {
				changed++
			}
		}
		if got.ChangedCount != changed {
			t.Errorf("step %d: version %d counts %d changed resources; %d changed", step, got.Version, got.ChangedCount, changed)
		}
		accepted++
	}
	t.Logf("%d accepted, %d refused", accepted, refused)
	if accepted < 30 || refused < 30 {
		t.Errorf("%d partial exports accepted, %d refused: the generator should make plenty of both", accepted, refused)
	}
}

// storedVersion reads version v whole, as MergePartial takes it, and its
// hashes by id.
func storedVersion(t *testing.T, st *store.Store, envID string, v int64) ([]intent.StoredResource, map[string]string) {
	t.Helper()
	rs, err := st.VersionResources(context.Background(), envID, v, "", 100000)
	if err != nil {
		t.Fatal(err)
	}
	base := make([]intent.StoredResource, len(rs))
	hashes := make(map[string]string, len(rs))
	for i, r := range rs {
		b := &base[i]
		if b.ID, err = resource.Parse(r.ID); err != nil {
			t.Fatal(err)
		}
		b.ResourceSet = r.ResourceSet
		for _, q := range r.Requires {
			id, err := resource.Parse(q)
			if err != nil {
				t.Fatal(err)
			}
			b.Requires = append(b.Requires, id)
		}
		h, err := hex.DecodeString(r.Hash)
		if err != nil || len(h) != len(b.Hash) {
			t.Fatalf("hash %q: %v", r.Hash, err)
		}
		copy(b.Hash[:], h)
		hashes[r.ID] = r.Hash
	}
	return base, hashes
}
