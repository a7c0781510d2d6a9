package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"

	"github.com/intendhq/intend/internal/project"
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
	files, err := checkArchive(archive)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(archive)
	m, err := s.opts.Store.PutModelSource(r.Context(), e.ID, hex.EncodeToString(sum[:]), archive, files, "cli")
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusCreated, m)
	return nil
}

// checkArchive unpacks an archive into a scratch directory and reads its
// intend.yaml: what the server stores, it can compile. It returns the
// number of files.
func checkArchive(archive []byte) (int, error) {
	dir, err := os.MkdirTemp("", "intend-model-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
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
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
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
	WriteJSON(w, http.StatusOK, m)
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
