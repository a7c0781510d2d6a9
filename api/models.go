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
	"slices"
	"strings"
	"time"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/project"
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
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/gzip" && mt != "application/x-gzip" {
		return UnsupportedMediaType("send the project archive (a gzipped tar, as intend export makes) as application/gzip")
	}
	if r.ContentLength > project.MaxArchiveBytes {
		return BodyTooLarge(project.MaxArchiveBytes)
	}
	archive, err := io.ReadAll(io.LimitReader(r.Body, project.MaxArchiveBytes+1))
	if err != nil {
		return BadRequest("request body could not be read")
	}
	if len(archive) > project.MaxArchiveBytes {
		return BodyTooLarge(project.MaxArchiveBytes)
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
	sum := sha256.Sum256(archive)
	hash := hex.EncodeToString(sum[:])
	// The model's service entities become the catalog and its archive the
	// model source, in one transaction, unless that would break live
	// instances: then neither changes.
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
	m, err := s.opts.Store.PutModel(r.Context(), e.ID, store.NewModel{
		Hash: hash, Archive: archive, Files: files, Origin: "cli", Entities: slices.Concat(res.Services, res.PreviousServices),
	})
	if err != nil {
		if be, ok := errors.AsType[*store.BreakingChangesError](err); ok {
			return breakingProblem(be)
		}
		return err
	}
	// Announced after the commit; if the server dies first, the
	// reconciler announces it.
	if m.AnnouncedAt == nil && s.opts.LSM != nil {
		// The live instances export their resources again, built by it.
		if err := s.opts.LSM.ModelChanged(r.Context(), e, hash); err != nil {
			s.log.WarnContext(r.Context(), "model source not announced to the service instances yet; the reconciler retries",
				"environment", e.Name, "model", hash, "error", err)
		} else {
			now := time.Now()
			m.AnnouncedAt = &now
		}
	}
	WriteJSON(w, http.StatusCreated, wireModelSource(m))
	return nil
}

// DefaultCompileTimeout bounds the compile of an uploaded model unless
// Options.CompileTimeout says otherwise.
const DefaultCompileTimeout = 10 * time.Minute

// compile runs a compile of the request's for environment e within the
// time limit and e's CPU time limit, through Options.Compiler.
func (s *Server) compile(r *http.Request, e store.Environment, opts compiler.Options) (*compiler.Result, error) {
	limit := s.opts.CompileTimeout
	if limit <= 0 {
		limit = DefaultCompileTimeout
	}
	return compiler.OrInProcess(s.opts.Compiler).Compile(r.Context(), opts,
		compiler.Job{Environment: e.ID, Timeout: limit, CPU: e.Settings.CompileCPU()})
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
