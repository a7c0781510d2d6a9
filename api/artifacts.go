package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
)

// Adapter plugins' artifacts (issue 30; store/artifacts.go): an author
// uploads them, content-addressed, a version's plugins name them, the
// environment's executors download them. Bodies stream both ways: the
// server holds a chunk (1 MiB) of an artifact at a time.

const mediaTypeOctetStream = "application/octet-stream"

// DefaultMaxArtifactUploads is how many artifact uploads a server takes
// at once unless told otherwise. An upload holds a database connection
// (its transaction) while its body arrives, for as long as the bulk body
// deadline allows, so uploads must not take more than a share of the
// pool (8 connections at least): slow clients would stall every request.
const DefaultMaxArtifactUploads = 2

// artifactUploadSlot takes one of the server's artifact uploads and the
// environment's one, or refuses (429, Retry-After). A refusal closes the
// connection: net/http would otherwise read what is left of the body
// before it answers, for as long as a slow client takes to send it.
func (s *Server) artifactUploadSlot(w http.ResponseWriter, e store.Environment) (release func(), err error) {
	w.Header().Set("Connection", "close")
	defer func() {
		if err == nil {
			w.Header().Del("Connection")
		}
	}()
	releaseEnv, ok := s.bulk.acquire("artifact-upload:"+e.ID, 1)
	if !ok {
		w.Header().Set("Retry-After", "5")
		return nil, TooManyRequests("environment %s has an artifact upload under way on this server; "+
			"retry when it has finished", e.Name)
	}
	releaseAll, ok := s.bulk.acquire("artifact-upload", s.opts.MaxArtifactUploads)
	if !ok {
		releaseEnv()
		w.Header().Set("Retry-After", "5")
		return nil, TooManyRequests("this server takes %d artifact uploads at once; retry when one has finished",
			s.opts.MaxArtifactUploads)
	}
	return func() { releaseAll(); releaseEnv() }, nil
}

// artifactDigest reads the {digest} path parameter.
func artifactDigest(r *http.Request) (string, error) {
	d, err := pathParam(chi.URLParam(r, "digest"))
	if err != nil {
		return "", err
	}
	if !store.ValidDigest(d) {
		return "", BadRequest("%.80q is not an artifact digest: sha256:<64 lowercase hex>", d)
	}
	return d, nil
}

// bodyReader remembers the error of reading a request body, which is
// the client's (it went away, or sent too slowly), not the server's.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// artifactTooLarge is the 413 of an upload over a limit, naming it.
func artifactTooLarge(tl *store.ArtifactTooLargeError) *Problem {
	p := newProblem(TypeBodyTooLarge, tl.Error())
	return p
}

// putArtifact handles PUT /environments/{env}/artifacts/{digest}: the
// body (application/octet-stream) is stored under digest, which it must
// hash to. 201 stored, 200 stored already (the body is not stored).
func (s *Server) putArtifact(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	digest, err := artifactDigest(r)
	if err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != mediaTypeOctetStream {
			return UnsupportedMediaType(fmt.Sprintf("send the artifact as %s, not %.80q", mediaTypeOctetStream, ct))
		}
	}
	detail := map[string]any{"digest": digest}
	if r.ContentLength >= 0 {
		detail["size"] = r.ContentLength
	}
	noteAudit(r, detail)
	lim := store.ArtifactLimits{MaxSize: s.opts.MaxArtifactSize, Quota: e.Settings.Quota()}
	// What the client says it sends is checked before anything is read.
	if r.ContentLength > lim.MaxSize {
		return artifactTooLarge(&store.ArtifactTooLargeError{Setting: "max_artifact_size", Limit: lim.MaxSize})
	}
	if r.ContentLength > lim.Quota {
		return artifactTooLarge(&store.ArtifactTooLargeError{Setting: "artifact_quota", Limit: lim.Quota})
	}
	releaseSlot, err := s.artifactUploadSlot(w, e)
	if err != nil {
		return err
	}
	release := sync.OnceFunc(releaseSlot)
	defer release()
	body := &bodyReader{r: r.Body}
	created, size, err := s.opts.Store.PutArtifact(r.Context(), e.ID, digest, body, lim)
	// The transaction is over: what is left (reading the body of an
	// artifact stored already) holds no connection.
	release()
	var tl *store.ArtifactTooLargeError
	var dm *store.DigestMismatchError
	switch {
	case errors.As(err, &tl):
		return artifactTooLarge(tl)
	case errors.As(err, &dm):
		return Validation(dm.Error(), FieldError{Field: "digest", Detail: "the body hashes to " + dm.Got})
	case err != nil && body.err != nil:
		return BadRequest("the artifact's body could not be read")
	case err != nil:
		return err
	}
	if !created {
		// Stored already: the body was not read. Read it to its end (up
		// to the limit) so that the connection stays usable.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, lim.MaxSize))
	}
	detail["size"], detail["stored"] = size, created
	a, err := s.opts.Store.GetArtifact(r.Context(), e.ID, digest)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	WriteJSON(w, status, wireArtifact(a))
	return nil
}

// headArtifact handles HEAD /environments/{env}/artifacts/{digest}: 200
// with the size as Content-Length when the environment stores it (an
// export uploads only the artifacts missing), else 404.
func (s *Server) headArtifact(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	digest, err := artifactDigest(r)
	if err != nil {
		return err
	}
	a, err := s.opts.Store.GetArtifact(r.Context(), e.ID, digest)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", mediaTypeOctetStream)
	w.Header().Set("Content-Length", strconv.FormatInt(a.Size, 10))
	w.WriteHeader(http.StatusOK)
	return nil
}

// deleteArtifact handles DELETE /environments/{env}/artifacts/{digest}:
// 204, 404 when not stored, 409 naming the versions that require it.
func (s *Server) deleteArtifact(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	digest, err := artifactDigest(r)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"digest": digest})
	if err := s.opts.Store.DeleteArtifact(r.Context(), e.ID, digest); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listArtifacts handles GET /environments/{env}/artifacts.
func (s *Server) listArtifacts(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	as, err := s.opts.Store.ListArtifacts(r.Context(), e.ID)
	if err != nil {
		return err
	}
	for i := range as {
		if as[i].Versions == nil {
			as[i].Versions = []int64{}
		}
	}
	writeList(w, as, wireArtifact)
	return nil
}

// executorArtifact handles GET /environments/{env}/executor/artifacts/{digest}:
// the artifact's content, streamed a chunk at a time, for the
// environment's executors (the executor verifies the digest itself).
func (s *Server) executorArtifact(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	digest, err := artifactDigest(r)
	if err != nil {
		return err
	}
	a, rc, err := s.opts.Store.OpenArtifact(r.Context(), e.ID, digest)
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", mediaTypeOctetStream)
	w.Header().Set("Content-Length", strconv.FormatInt(a.Size, 10))
	w.Header().Set("ETag", `"`+digest+`"`)
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		// The status is out: the client sees the body end short of
		// Content-Length.
		s.log.WarnContext(r.Context(), "artifact download cut short", "environment", e.Name, "digest", digest, "error", err)
	}
	return nil
}

// pointerToken escapes a JSON pointer token.
var pointerToken = strings.NewReplacer("~", "~0", "/", "~1")

// refusePlugins refuses (422) a version whose plugins name artifacts the
// environment does not store, or, in a confined environment, artifacts
// its allowed_plugins does not list; each named by its JSON pointer
// (/plugins/0/artifacts/linux~1amd64).
func (s *Server) refusePlugins(ctx context.Context, e store.Environment, ps []ledger.Plugin) error {
	if len(ps) == 0 {
		return nil
	}
	var digests []string
	for _, p := range ps {
		for _, d := range p.Artifacts {
			digests = append(digests, d)
		}
	}
	missing, err := s.opts.Store.MissingArtifacts(ctx, e.ID, digests)
	if err != nil {
		return err
	}
	rules := e.Settings.Confinement()
	var absent, refused []FieldError
	for i, p := range ps {
		for _, platform := range slices.Sorted(maps.Keys(p.Artifacts)) {
			d := p.Artifacts[platform]
			field := "/plugins/" + strconv.Itoa(i) + "/artifacts/" + pointerToken.Replace(platform)
			if slices.Contains(missing, d) {
				absent = append(absent, FieldError{Field: field, Detail: fmt.Sprintf("plugin %s: artifact %s (%s) is not "+
					"stored in environment %s: upload it first (PUT .../artifacts/%s)", p.Name, d, platform, e.Name, d)})
			}
			if ref := rules.CheckPlugin(p.Name, d); ref != nil {
				refused = append(refused, FieldError{Field: field, Detail: ref.Reason})
			}
		}
	}
	switch {
	case len(absent) > 0:
		return Validation("the version requires plugin artifacts the environment does not store", append(absent, refused...)...)
	case len(refused) > 0:
		return Validation("the version requires plugins outside the environment's confinement (setting allowed_plugins; "+
			"only a global admin changes it)", refused...)
	}
	return nil
}

func wireArtifact(a store.Artifact) client.Artifact { return client.Artifact(a) }

// wirePlugins is a version's plugins on the wire ([] for none).
func wirePlugins(ps []ledger.Plugin) []client.Plugin {
	out := make([]client.Plugin, len(ps))
	for i, p := range ps {
		out[i] = client.Plugin(p)
	}
	return out
}
