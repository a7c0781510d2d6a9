package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/internal/publish"
	"github.com/intendhq/intend/internal/store"
)

// The model source: the project an environment's model is compiled from
// (PUT .../model by intend export), which the server compiles service
// instances from.

// putModel stores a project archive as the environment's model source.
func (s *Server) putModel(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	if err := refusePush(e, "models"); err != nil {
		return err
	}
	archive, err := readArchive(r)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "intend-model-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	files, err := checkArchive(archive, dir)
	if err != nil {
		return err
	}
	var stage bool
	switch r.URL.Query().Get("stage") {
	case "", "false":
	case "true":
		stage = true
	default:
		return InvalidField("?stage", "must be true or false")
	}
	sum := sha256.Sum256(archive)
	hash := hex.EncodeToString(sum[:])
	// The model's service entities become the catalog (with ?stage=true:
	// once a version built from it is released) and its archive the model
	// source, in one transaction, unless that would break live instances:
	// then neither changes.
	res, err := s.compile(r, e, compiler.Options{Dir: dir, SourceKey: hash})
	if err != nil {
		if errs, ok := errors.AsType[compiler.Errors](err); ok {
			return Validation("the model does not compile on the server: " + errs.Error())
		}
		if le, ok := errors.AsType[*compiler.LimitError](err); ok {
			return Validation("the model does not compile on the server: " + le.Error())
		}
		return err
	}
	m, err := publish.Model(r.Context(), s.opts.Store, e.ID,
		publish.Source{Hash: hash, Archive: archive, Files: files, Origin: "cli", Stage: stage}, res)
	if err != nil {
		if be, ok := errors.AsType[*store.BreakingChangesError](err); ok {
			return breakingProblem(be)
		}
		return err
	}
	// Not announced to the live instances: the source becomes theirs
	// when a version built from it is released (released).
	WriteJSON(w, http.StatusCreated, wireModelSource(m))
	return nil
}

// released finishes a release after its commit: it wakes the scheduler
// for the deploy the release queued and announces to the live service
// instances the model source the release made theirs (they export their
// resources again, built by it). A halted environment is told nothing
// until it is resumed; a failed announcement is the reconciler's to
// retry.
func (s *Server) released(r *http.Request, e store.Environment, rel store.Release) {
	if rel.Request != nil {
		s.wake(r, e, rel.Request.Reason, true, false)
	}
	s.announce(r, e, rel.Model)
}

// announce tells e's live service instances of the model source hash
// ("": nothing to tell), unless e is halted.
func (s *Server) announce(r *http.Request, e store.Environment, hash string) {
	if hash == "" || e.Halted || s.opts.LSM == nil {
		return
	}
	if err := s.opts.LSM.ModelChanged(r.Context(), e.LSM(), hash); err != nil {
		s.log.WarnContext(r.Context(), "model source not announced to the service instances yet; the reconciler retries",
			"environment", e.Name, "model", hash, "error", err)
	}
}

// modelSourceParam reads ?model_source, the model source a pushed
// version was compiled from ("" when absent), which must be stored.
func (s *Server) modelSourceParam(r *http.Request, e store.Environment) (string, error) {
	hash := r.URL.Query().Get("model_source")
	if hash == "" {
		return "", nil
	}
	if len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
		return "", InvalidField("?model_source", "must be a model source's hash (64 lower-case hex digits)")
	}
	ok, err := s.opts.Store.HasModelSource(r.Context(), e.ID, hash)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", InvalidField("?model_source", "the environment stores no model source "+hash+" (upload it first: PUT .../model)")
	}
	return hash, nil
}

// releaseParam reads ?release of a pushed version: true releases it,
// false does not (a dry-run's), absent leaves it to the environment's
// auto_release.
func releaseParam(r *http.Request, e store.Environment) (bool, error) {
	switch r.URL.Query().Get("release") {
	case "":
		return e.Settings.AutoRelease, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, InvalidField("?release", "must be true or false")
}

// releasePushed releases a pushed version as ?release and auto_release
// say: an explicit ?release=true as POST .../release does; auto_release
// unless the environment is halted (then the version is held until it
// is resumed). It returns the version as it is now.
func (s *Server) releasePushed(r *http.Request, e store.Environment, info store.VersionInfo) (store.VersionInfo, error) {
	explicit := r.URL.Query().Get("release") == "true"
	var rel store.Release
	var err error
	if explicit {
		rel, err = s.opts.Store.ReleaseVersion(r.Context(), e.ID, info.Version)
	} else {
		var held bool
		rel, held, err = s.opts.Store.ReleaseUnlessHalted(r.Context(), e.ID, info.Version)
		if err == nil && held {
			return info, nil
		}
	}
	if err != nil {
		return info, err
	}
	s.released(r, e, rel)
	kept := info.KeptInstanceResources
	info = rel.Version
	info.KeptInstanceResources = kept
	return info, nil
}

// DefaultCompileTimeout bounds the compile of an uploaded model unless
// the server sets its own (Options.CompileTimeout).
const DefaultCompileTimeout = publish.DefaultCompileTimeout

// compile compiles a model for e in the request, as every server-side
// compile runs (publish.Compile).
func (s *Server) compile(r *http.Request, e store.Environment, opts compiler.Options) (*compiler.Result, error) {
	return publish.Compile(r.Context(), s.opts.Compiler, e, opts, s.opts.CompileTimeout)
}

// breakingProblem is the 409 of a catalog update that would break live
// instances: each change with the instances it breaks.
func breakingProblem(be *store.BreakingChangesError) *Problem {
	var lines []string
	for _, c := range be.Changes {
		lines = append(lines, fmt.Sprintf("%s: %s (instances %s)", c.Entity, c.Detail, strings.Join(c.Instances, ", ")))
	}
	return Conflict("the service catalog update would break live instances: %s", strings.Join(lines, "; "))
}

// readArchive reads a request's body: a project archive (a gzipped tar,
// as intend export makes it) of at most project.MaxArchiveBytes.
func readArchive(r *http.Request) ([]byte, error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/gzip" && mt != "application/x-gzip" {
		return nil, UnsupportedMediaType("send the project archive (a gzipped tar, as intend export makes) as application/gzip")
	}
	if r.ContentLength > project.MaxArchiveBytes {
		return nil, BodyTooLarge(project.MaxArchiveBytes)
	}
	archive, err := io.ReadAll(io.LimitReader(r.Body, project.MaxArchiveBytes+1))
	if err != nil {
		return nil, BadRequest("request body could not be read")
	}
	if len(archive) > project.MaxArchiveBytes {
		return nil, BodyTooLarge(project.MaxArchiveBytes)
	}
	return archive, nil
}

// checkArchive unpacks an archive into dir and reads its intend.yaml: what
// the server stores, it can compile. It returns the number of files.
func checkArchive(archive []byte, dir string) (int, error) {
	if err := project.Extract(archive, dir); err != nil {
		if ae, ok := errors.AsType[*project.ArchiveError](err); ok {
			return 0, Validation(ae.Error())
		}
		return 0, err
	}
	if _, err := project.Load(dir); err != nil {
		if pe, ok := errors.AsType[*project.Error](err); ok {
			pe.File = filepath.Base(pe.File)
			return 0, Validation("the archive is not an intend project: " + pe.Error())
		}
		return 0, err
	}
	files := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return err
	})
	return files, err
}

// getModel describes the environment's newest model source.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	m, err := s.opts.Store.LatestModelSource(r.Context(), e.ID)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wireModelSource(m))
	return nil
}

// getModelArchive sends the newest model source's archive.
func (s *Server) getModelArchive(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	m, err := s.opts.Store.LatestModelSource(r.Context(), e.ID)
	if err != nil {
		return err
	}
	b, err := s.opts.Store.ModelArchive(r.Context(), e.ID, m.Hash)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("ETag", `"`+m.Hash+`"`)
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}
