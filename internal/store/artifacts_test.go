package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/intendhq/intend/internal/store"
)

// artifact returns n pseudo-random bytes (seeded) and their digest.
func artifact(n int, seed uint64) ([]byte, string) {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	sum := sha256.Sum256(b)
	return b, "sha256:" + hex.EncodeToString(sum[:])
}

// countingReader counts what was read of it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestArtifactRoundTrip: an artifact of several chunks (the last one
// short) reads back byte for byte; the same digest again is not stored
// twice and its body is not read.
func TestArtifactRoundTrip(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := store.WithActor(context.Background(), "token:ci")
	data, digest := artifact(3*store.ArtifactChunkSize+12345, 1)
	created, size, err := st.PutArtifact(ctx, e.ID, digest, bytes.NewReader(data), store.ArtifactLimits{})
	if err != nil || !created || size != int64(len(data)) {
		t.Fatalf("put: created %v size %d err %v", created, size, err)
	}
	var chunks int
	if err := conn.QueryRow(ctx, `select count(*) from artifact_chunks where digest = $1`, digest).Scan(&chunks); err != nil || chunks != 4 {
		t.Errorf("chunks = %d (%v), want 4 of at most 1 MiB", chunks, err)
	}
	a, rc, err := st.OpenArtifact(ctx, e.ID, digest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want the %d uploaded", len(got), err, len(data))
	}
	if a.Size != int64(len(data)) || a.UploadedBy != "token:ci" {
		t.Errorf("artifact = %+v", a)
	}

	again := &countingReader{r: bytes.NewReader(data)}
	created, size, err = st.PutArtifact(ctx, e.ID, digest, again, store.ArtifactLimits{})
	if err != nil || created || size != int64(len(data)) || again.n != 0 {
		t.Errorf("second put: created %v size %d err %v, read %d bytes; want stored already, body unread", created, size, err, again.n)
	}
	list, err := st.ListArtifacts(ctx, e.ID)
	if err != nil || len(list) != 1 || list[0].Digest != digest {
		t.Errorf("list = %+v (%v)", list, err)
	}
	if _, _, err := st.OpenArtifact(ctx, e.ID, "sha256:"+hex.EncodeToString(make([]byte, 32))); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("open of an artifact never uploaded: %v, want ErrNotFound", err)
	}
}

// TestArtifactDigestMismatch: a body that does not hash to the digest
// it is uploaded under is refused, naming both, and nothing is kept.
func TestArtifactDigestMismatch(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	data, _ := artifact(2*store.ArtifactChunkSize+1, 2)
	_, other := artifact(10, 3)
	_, _, err := st.PutArtifact(ctx, e.ID, other, bytes.NewReader(data), store.ArtifactLimits{})
	var dm *store.DigestMismatchError
	if !errors.As(err, &dm) || dm.Want != other || dm.Got == other {
		t.Fatalf("put under another digest: %v, want a DigestMismatchError", err)
	}
	var rows int
	if err := conn.QueryRow(ctx, `select (select count(*) from artifacts) + (select count(*) from artifact_chunks)`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d rows kept (%v), want none", rows, err)
	}
}

// TestArtifactTooLarge: a body over the server's limit is refused as
// soon as it passes it, not after reading it all.
func TestArtifactTooLarge(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	data, digest := artifact(8*store.ArtifactChunkSize, 4)
	body := &countingReader{r: bytes.NewReader(data)}
	_, _, err := st.PutArtifact(ctx, e.ID, digest, body, store.ArtifactLimits{MaxSize: 2 * store.ArtifactChunkSize})
	var tl *store.ArtifactTooLargeError
	if !errors.As(err, &tl) || tl.Setting != "max_artifact_size" || tl.Limit != 2*store.ArtifactChunkSize {
		t.Fatalf("put of 8 MiB under a limit of 2: %v, want max_artifact_size refused", err)
	}
	if body.n > 3*store.ArtifactChunkSize {
		t.Errorf("read %d bytes of the body, want at most a chunk past the limit", body.n)
	}
	var rows int
	if err := conn.QueryRow(ctx, `select count(*) from artifacts`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d artifacts kept (%v), want none", rows, err)
	}
	// At the limit exactly is fine.
	data, digest = artifact(2*store.ArtifactChunkSize, 5)
	if _, _, err := st.PutArtifact(ctx, e.ID, digest, bytes.NewReader(data), store.ArtifactLimits{MaxSize: 2 * store.ArtifactChunkSize}); err != nil {
		t.Errorf("put at the limit: %v", err)
	}
}

// TestArtifactQuota: the environment's artifacts together stay within
// its quota; another environment's do not count.
func TestArtifactQuota(t *testing.T) {
	t.Parallel()
	st, _, _ := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	lim := store.ArtifactLimits{Quota: 3 * store.ArtifactChunkSize}
	a, da := artifact(2*store.ArtifactChunkSize, 6)
	if _, _, err := st.PutArtifact(ctx, e.ID, da, bytes.NewReader(a), lim); err != nil {
		t.Fatal(err)
	}
	b, db := artifact(2*store.ArtifactChunkSize, 7)
	_, _, err := st.PutArtifact(ctx, e.ID, db, bytes.NewReader(b), lim)
	var tl *store.ArtifactTooLargeError
	if !errors.As(err, &tl) || tl.Setting != "artifact_quota" || tl.Used != int64(len(a)) {
		t.Fatalf("put over the quota: %v, want artifact_quota refused with %d used", err, len(a))
	}
	other, err := st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p", Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.PutArtifact(ctx, other.ID, db, bytes.NewReader(b), lim); err != nil {
		t.Errorf("put in another environment: %v", err)
	}
	// The same digest in two environments is two artifacts: deleting
	// one environment deletes its own.
	if err := st.DeleteEnvironment(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetArtifact(ctx, e.ID, da); err != nil {
		t.Errorf("e's artifact after deleting another environment: %v", err)
	}
}

// TestArtifactConcurrentUploads: two uploads of one digest at once both
// succeed, and it is stored once.
func TestArtifactConcurrentUploads(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	data, digest := artifact(3*store.ArtifactChunkSize, 8)
	var wg sync.WaitGroup
	created := make([]bool, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			created[i], _, errs[i] = st.PutArtifact(ctx, e.ID, digest, bytes.NewReader(data), store.ArtifactLimits{})
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || created[0] == created[1] {
		t.Fatalf("two uploads at once: created %v, errors %v; want both fine, one stored", created, errs)
	}
	var chunks int
	if err := conn.QueryRow(ctx, `select count(*) from artifact_chunks where digest = $1`, digest).Scan(&chunks); err != nil || chunks != 3 {
		t.Errorf("chunks = %d (%v), want 3", chunks, err)
	}
}

// TestArtifactsGoWithTheirEnvironment: deleting an environment deletes
// its artifacts.
func TestArtifactsGoWithTheirEnvironment(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	data, digest := artifact(100, 9)
	if _, _, err := st.PutArtifact(ctx, e.ID, digest, bytes.NewReader(data), store.ArtifactLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteEnvironment(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := conn.QueryRow(ctx, `select (select count(*) from artifacts) + (select count(*) from artifact_chunks)`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d rows left (%v), want none", rows, err)
	}
}

// TestArtifactAcrossReplicas: two replicas are two stores (two pools) on
// one database. An artifact another replica is still uploading is not
// there for this one (not got, listed missing, so an export through it
// is refused), and a second upload of the same digest through it waits
// for the first and finds it stored; once committed, this replica
// streams it byte for byte (an executor may fetch through either).
func TestArtifactAcrossReplicas(t *testing.T) {
	t.Parallel()
	one, url, _ := open(t)
	other, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	e := newEnv(t, one)
	ctx := context.Background()
	data, digest := artifact(2*store.ArtifactChunkSize+7, 12)

	pr, pw := io.Pipe()
	firstDone := make(chan error, 1)
	go func() {
		_, _, err := one.PutArtifact(ctx, e.ID, digest, pr, store.ArtifactLimits{})
		firstDone <- err
	}()
	// The first chunk is in replica one's transaction.
	if _, err := pw.Write(data[:store.ArtifactChunkSize+1]); err != nil {
		t.Fatal(err)
	}
	if _, err := other.GetArtifact(ctx, e.ID, digest); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an artifact being uploaded through the other replica: got %v, want not found", err)
	}
	if missing, err := other.MissingArtifacts(ctx, e.ID, []string{digest}); err != nil || len(missing) != 1 {
		t.Errorf("missing = %v, %v; want the artifact being uploaded", missing, err)
	}
	secondDone := make(chan bool, 1)
	go func() {
		created, _, err := other.PutArtifact(ctx, e.ID, digest, bytes.NewReader(data), store.ArtifactLimits{})
		if err != nil {
			t.Error(err)
		}
		secondDone <- created
	}()
	if _, err := pw.Write(data[store.ArtifactChunkSize+1:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if created := <-secondDone; created {
		t.Error("the second upload stored the artifact again")
	}
	_, rc, err := other.OpenArtifact(ctx, e.ID, digest)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read through the other replica: %d bytes, %v; want the %d uploaded", len(got), err, len(data))
	}
}

// TestArtifactQuotaCountsEachArtifact: tiny artifacts count
// MinArtifactCharge each against the quota, so a quota of bytes bounds
// the rows too (review of issue 30: 2 GiB of one-byte artifacts were 2
// billion rows, each costing the database far more than its byte).
func TestArtifactQuotaCountsEachArtifact(t *testing.T) {
	t.Parallel()
	st, _, _ := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	lim := store.ArtifactLimits{Quota: 4 * store.MinArtifactCharge}
	stored := 0
	var refusal error
	for i := range 10 {
		b, d := artifact(1, uint64(1000+i))
		if _, _, err := st.PutArtifact(ctx, e.ID, d, bytes.NewReader(b), lim); err != nil {
			refusal = err
			break
		}
		stored++
	}
	var tl *store.ArtifactTooLargeError
	if stored != 4 || !errors.As(refusal, &tl) || tl.Setting != "artifact_quota" {
		t.Fatalf("stored %d one-byte artifacts in a quota of 4 charges, then %v; want 4, then artifact_quota refused", stored, refusal)
	}
}
