package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Adapter plugins' artifacts (issue 30): the executables and zipapps a
// version's plugins run, stored per environment, addressed by their
// SHA-256 ("sha256:<64 lowercase hex>"), in chunks of ArtifactChunkSize.
// An upload streams its body into chunks, hashing as it writes, in one
// transaction: it commits only when the digest matched and the limits
// held, so an artifact is either whole and verified or absent. A
// download reads one chunk at a time.

// ArtifactChunkSize is the size of an artifact's chunks (the last one is
// shorter): what an upload or a download holds in memory.
const ArtifactChunkSize = 1 << 20

// DefaultMaxArtifactSize bounds one artifact unless the server says
// otherwise (intend server --max-artifact-size).
const DefaultMaxArtifactSize = 256 << 20

// DefaultArtifactQuota bounds the artifacts of one environment, all
// together, unless its artifact_quota setting says otherwise.
const DefaultArtifactQuota = 2 << 30

// MinArtifactCharge is what an artifact counts against its environment's
// quota at least: a row and a chunk cost the database more than a few
// bytes, so a quota of bytes alone would let an author store millions of
// one-byte artifacts (at most 32,768 within the default quota).
const MinArtifactCharge = 64 << 10

// digestPattern is an artifact's digest.
var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidDigest reports whether d is an artifact digest, "sha256:" and 64
// lowercase hex digits.
func ValidDigest(d string) bool { return digestPattern.MatchString(d) }

// Artifact is an artifact stored in an environment.
type Artifact struct {
	Digest     string    `json:"digest"`
	Size       int64     `json:"size"`
	UploadedBy string    `json:"uploaded_by"`
	UploadedAt time.Time `json:"uploaded_at"`
	// Versions are the environment's versions whose plugins require it
	// (ListArtifacts fills it in), oldest first.
	Versions []int64 `json:"versions"`
}

// ArtifactTooLargeError refuses an upload over a limit: the server's
// largest artifact (Setting "max_artifact_size") or the environment's
// quota of all its artifacts ("artifact_quota", Used of it taken by the
// others).
type ArtifactTooLargeError struct {
	Setting string
	Limit   int64
	Used    int64
}

func (e *ArtifactTooLargeError) Error() string {
	if e.Setting == "artifact_quota" {
		return fmt.Sprintf("the artifact does not fit in the environment's artifact_quota of %d bytes "+
			"(%d bytes are taken by its other artifacts, each counting 64 KiB at least)", e.Limit, e.Used)
	}
	return fmt.Sprintf("the artifact exceeds the server's max_artifact_size of %d bytes", e.Limit)
}

// DigestMismatchError refuses an upload whose body does not hash to the
// digest it was uploaded under.
type DigestMismatchError struct {
	Want, Got string
}

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("the body's digest is %s, not %s (the digest in the URL): nothing was stored", e.Got, e.Want)
}

// ArtifactLimits bound an upload.
type ArtifactLimits struct {
	// MaxSize bounds the artifact (0: DefaultMaxArtifactSize).
	MaxSize int64
	// Quota bounds the environment's artifacts together (0:
	// DefaultArtifactQuota).
	Quota int64
}

func (l ArtifactLimits) orDefault() ArtifactLimits {
	if l.MaxSize <= 0 {
		l.MaxSize = DefaultMaxArtifactSize
	}
	if l.Quota <= 0 {
		l.Quota = DefaultArtifactQuota
	}
	return l
}

// PutArtifact stores the artifact body, which must hash to digest, in the
// environment, as the context's actor's upload. It returns whether it
// stored it (false: the environment has it already; body is not read)
// and its size.
//
// The body is read a chunk at a time, each chunk written as it comes,
// hashed as it is written; a body over the limits is refused as soon as
// it passes them (*ArtifactTooLargeError), one that does not hash to
// digest at its end (*DigestMismatchError); either way nothing is kept.
// Two uploads of one digest at once store it once: the second waits for
// the first and finds it stored (or stores it, if the first failed).
func (s *Store) PutArtifact(ctx context.Context, envID, digest string, body io.Reader, lim ArtifactLimits) (created bool, size int64, err error) {
	if !ValidDigest(digest) {
		return false, 0, fmt.Errorf("artifact digest %q: want sha256:<64 lowercase hex>", digest)
	}
	lim = lim.orDefault()
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		// The row's key is taken first: a concurrent upload of the
		// same digest waits here until this transaction ends.
		var mine bool
		err := tx.QueryRow(ctx, `insert into artifacts (environment_id, digest, size, uploaded_by)
			values ($1::uuid, $2, 0, $3) on conflict do nothing returning true`,
			envID, digest, ActorOf(ctx)).Scan(&mine)
		if errors.Is(err, pgx.ErrNoRows) {
			// Stored (and complete: an upload commits whole or not at all).
			return tx.QueryRow(ctx, `select size from artifacts where environment_id = $1::uuid and digest = $2`,
				envID, digest).Scan(&size)
		}
		if isForeignKeyViolation(err) {
			return NotFound("environment %q", envID)
		}
		if err != nil {
			return err
		}
		created = true
		used, err := artifactsUsed(ctx, tx, envID)
		if err != nil {
			return err
		}
		limit, over := lim.MaxSize, &ArtifactTooLargeError{Setting: "max_artifact_size", Limit: lim.MaxSize}
		if room := lim.Quota - used; room < limit {
			limit, over = room, &ArtifactTooLargeError{Setting: "artifact_quota", Limit: lim.Quota, Used: used}
		}
		rows, err := newChunkRows(envID, digest, body, limit, over)
		if err != nil {
			return err
		}
		// One COPY streams the chunks: a row is written as its chunk
		// arrives, through one buffer of a chunk (an INSERT a chunk
		// would encode each twice more).
		if _, err := tx.Conn().PgConn().CopyFrom(ctx, rows,
			`copy artifact_chunks (environment_id, digest, seq, data) from stdin (format binary)`); err != nil {
			if rerr := rows.failure(); rerr != nil {
				return rerr
			}
			return err
		}
		size = rows.size
		// The quota again, under the environment's artifact lock: uploads
		// of other digests may have committed meanwhile.
		if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended('intend.artifacts.' || $1, 0))`,
			envID); err != nil {
			return err
		}
		if used, err = artifactsUsed(ctx, tx, envID); err != nil {
			return err
		}
		if used+max(size, MinArtifactCharge) > lim.Quota {
			return &ArtifactTooLargeError{Setting: "artifact_quota", Limit: lim.Quota, Used: used}
		}
		_, err = tx.Exec(ctx, `update artifacts set size = $3, complete = true, uploaded_at = now()
			where environment_id = $1::uuid and digest = $2`, envID, digest, size)
		return err
	})
	if err != nil {
		return false, 0, err
	}
	return created, size, nil
}

// chunkRows is an artifact's body as the rows of artifact_chunks in
// COPY's binary format: a row a chunk of ArtifactChunkSize, read into
// one buffer, hashed as it is read. Past the limit it fails with over;
// at the body's end, with a *DigestMismatchError unless it hashed to
// digest; a failure is kept for failure (COPY reports its own).
type chunkRows struct {
	body   io.Reader
	digest string
	limit  int64
	over   error
	h      hash.Hash
	buf    []byte // the chunk
	prefix []byte // a row's fields before its data
	out    [][]byte
	seq    int32
	size   int64
	done   bool

	mu  sync.Mutex
	err error
}

// copyHeader is COPY's binary signature, flags and header extension.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

func newChunkRows(envID, digest string, body io.Reader, limit int64, over error) (*chunkRows, error) {
	var id pgtype.UUID
	if err := id.Scan(envID); err != nil {
		return nil, NotFound("environment %q", envID)
	}
	// Fields: count 4; uuid (16); text digest; int4 seq; bytea.
	prefix := binary.BigEndian.AppendUint16(nil, 4)
	prefix = binary.BigEndian.AppendUint32(prefix, 16)
	prefix = append(prefix, id.Bytes[:]...)
	prefix = binary.BigEndian.AppendUint32(prefix, uint32(len(digest)))
	prefix = append(prefix, digest...)
	prefix = binary.BigEndian.AppendUint32(prefix, 4)
	prefix = append(prefix, 0, 0, 0, 0, 0, 0, 0, 0) // seq, the data's length
	return &chunkRows{body: body, digest: digest, limit: limit, over: over, h: sha256.New(),
		buf: make([]byte, ArtifactChunkSize), prefix: prefix, out: [][]byte{copyHeader}}, nil
}

func (c *chunkRows) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		if c.done {
			return 0, io.EOF
		}
		if err := c.next(); err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			return 0, err
		}
	}
	n := copy(p, c.out[0])
	if c.out[0] = c.out[0][n:]; len(c.out[0]) == 0 {
		c.out = c.out[1:]
	}
	return n, nil
}

// next reads the next chunk into the rows to send, or ends them.
func (c *chunkRows) next() error {
	n, err := io.ReadFull(c.body, c.buf)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return fmt.Errorf("read the artifact: %w", err)
	}
	if n > 0 {
		if c.size += int64(n); c.size > c.limit {
			return c.over
		}
		c.h.Write(c.buf[:n])
		l := len(c.prefix)
		binary.BigEndian.PutUint32(c.prefix[l-8:], uint32(c.seq))
		binary.BigEndian.PutUint32(c.prefix[l-4:], uint32(n))
		c.seq++
		c.out = append(c.out[:0], c.prefix, c.buf[:n])
	}
	if err == nil {
		return nil
	}
	if got := "sha256:" + hex.EncodeToString(c.h.Sum(nil)); got != c.digest {
		return &DigestMismatchError{Want: c.digest, Got: got}
	}
	c.done = true
	c.out = append(c.out, []byte{0xff, 0xff}) // the trailer
	return nil
}

// failure is why Read failed, nil if it did not.
func (c *chunkRows) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// artifactsUsed is what the environment's complete artifacts count
// against its quota: their sizes, each MinArtifactCharge at least.
func artifactsUsed(ctx context.Context, tx pgx.Tx, envID string) (int64, error) {
	var used int64
	err := tx.QueryRow(ctx, `select coalesce(sum(greatest(size, $2)), 0)::bigint from artifacts
		where environment_id = $1::uuid and complete`, envID, MinArtifactCharge).Scan(&used)
	return used, err
}

// GetArtifact returns the artifact digest of the environment (without
// Versions); an artifact not stored is ErrNotFound.
func (s *Store) GetArtifact(ctx context.Context, envID, digest string) (Artifact, error) {
	a := Artifact{Digest: digest}
	err := s.pool.QueryRow(ctx, `select size, coalesce(uploaded_by, ''), uploaded_at from artifacts
		where environment_id = $1::uuid and digest = $2 and complete`, envID, digest).
		Scan(&a.Size, &a.UploadedBy, &a.UploadedAt)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !ValidDigest(digest)) {
		return a, NotFound("artifact %s", digest)
	}
	return a, err
}

// ListArtifacts returns the environment's artifacts, by digest, each
// with the versions whose plugins require it.
func (s *Store) ListArtifacts(ctx context.Context, envID string) ([]Artifact, error) {
	rows, err := s.pool.Query(ctx, `select a.digest, a.size, coalesce(a.uploaded_by, ''), a.uploaded_at,
		       coalesce((select array_agg(v.version order by v.version) from versions v
		                 where v.environment_id = a.environment_id and v.plugins is not null
		                   and exists (select 1 from jsonb_array_elements(v.plugins) p,
		                                   jsonb_each_text(coalesce(p->'artifacts', '{}')) x
		                               where x.value = a.digest)), '{}')
		from artifacts a where a.environment_id = $1::uuid and a.complete order by a.digest`, envID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Artifact, error) {
		var a Artifact
		return a, r.Scan(&a.Digest, &a.Size, &a.UploadedBy, &a.UploadedAt, &a.Versions)
	})
}

// MissingArtifacts returns those of digests the environment does not
// store (complete), in the order given.
func (s *Store) MissingArtifacts(ctx context.Context, envID string, digests []string) ([]string, error) {
	if len(digests) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `select d from unnest($2::text[]) with ordinality as u(d, i)
		where not exists (select 1 from artifacts a where a.environment_id = $1::uuid and a.digest = u.d and a.complete)
		order by i`, envID, digests)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// OpenArtifact returns the artifact digest of the environment and a
// reader of its content, which reads one chunk at a time (a query per
// chunk, so a slow reader holds no connection); ctx bounds the reads.
// An artifact not stored is ErrNotFound.
func (s *Store) OpenArtifact(ctx context.Context, envID, digest string) (Artifact, io.ReadCloser, error) {
	a, err := s.GetArtifact(ctx, envID, digest)
	if err != nil {
		return a, nil, err
	}
	var chunks int
	if err := s.pool.QueryRow(ctx, `select count(*) from artifact_chunks where environment_id = $1::uuid and digest = $2`,
		envID, digest).Scan(&chunks); err != nil {
		return a, nil, err
	}
	return a, &artifactReader{ctx: ctx, s: s, envID: envID, digest: digest, chunks: chunks}, nil
}

// artifactReader reads an artifact's chunks in order, each into the same
// buffer. It keeps the context OpenArtifact was given: an io.Reader's
// Read takes none.
type artifactReader struct {
	ctx           context.Context
	s             *Store
	envID, digest string
	chunks, next  int
	buf           []byte
	cur           []byte
}

func (r *artifactReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.next >= r.chunks {
			return 0, io.EOF
		}
		if r.buf == nil {
			r.buf = make([]byte, ArtifactChunkSize)
		}
		data := pgtype.PreallocBytes(r.buf[:cap(r.buf)])
		err := r.s.pool.QueryRow(r.ctx, `select data from artifact_chunks
			where environment_id = $1::uuid and digest = $2 and seq = $3`, r.envID, r.digest, r.next).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, NotFound("artifact %s (chunk %d)", r.digest, r.next)
		}
		if err != nil {
			return 0, fmt.Errorf("read chunk %d of artifact %s: %w", r.next, r.digest, err)
		}
		r.cur = data
		r.next++
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// WriteTo writes the artifact to w chunk by chunk, without a copy
// through the caller's buffer (io.Copy uses it).
func (r *artifactReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if len(r.cur) == 0 {
			if _, err := r.Read(nil); err != nil {
				if err == io.EOF {
					return total, nil
				}
				return total, err
			}
		}
		n, err := w.Write(r.cur)
		total += int64(n)
		r.cur = r.cur[n:]
		if err != nil {
			return total, err
		}
	}
}

func (r *artifactReader) Close() error {
	r.cur, r.buf = nil, nil
	return nil
}

// DeleteArtifact removes the artifact digest of the environment, which
// frees its share of the artifact_quota. An artifact a version of the
// environment requires is a conflict naming the versions (delete or
// let the retention prune them first); one not stored is ErrNotFound.
// The row is locked, so that an upload of the same digest at once waits
// for the delete to end.
func (s *Store) DeleteArtifact(ctx context.Context, envID, digest string) error {
	if !ValidDigest(digest) {
		return NotFound("artifact %s", digest)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var found bool
		err := tx.QueryRow(ctx, `select true from artifacts where environment_id = $1::uuid and digest = $2 and complete
			for update`, envID, digest).Scan(&found)
		if errors.Is(err, pgx.ErrNoRows) {
			return NotFound("artifact %s", digest)
		}
		if err != nil {
			return err
		}
		var versions []int64
		if err := tx.QueryRow(ctx, `select coalesce(array_agg(v.version order by v.version), '{}') from versions v
			where v.environment_id = $1::uuid and v.plugins is not null
			  and exists (select 1 from jsonb_array_elements(v.plugins) p, jsonb_each_text(coalesce(p->'artifacts', '{}')) x
			              where x.value = $2)`, envID, digest).Scan(&versions); err != nil {
			return err
		}
		if len(versions) > 0 {
			return Conflict("artifact %s is required by version(s) %v of the environment: delete them first", digest, versions)
		}
		_, err = tx.Exec(ctx, `delete from artifacts where environment_id = $1::uuid and digest = $2`, envID, digest)
		return err
	})
}
