// Package kv is the adapter of the custom executor example: kv::Entry, one
// KEY=value line of an environment file, the kind systemd's
// EnvironmentFile= and docker's --env-file read.
//
// It shows what an adapter needs and no more: it validates its attributes
// (refusing bad ones with a permanent error that names the attribute),
// observes without changing anything, writes idempotently and atomically,
// and leaves alone what it does not manage (comments and other keys).
package kv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/intendhq/intend/adapters"
)

// EntryType is the resource type that Entry manages.
const EntryType = "kv::Entry"

// Entry manages the entries of an environment file on the executor's
// host: kv::Entry. Ids stay short, kv::Entry[web1,key=PORT]: an agent has
// one file.
//
// Attributes:
//   - key (string, required): the id attribute; a shell-style name,
//     [A-Za-z_][A-Za-z0-9_]*.
//   - value (string, required unless purged): the rest of the line, on one
//     line.
//   - file (string, optional): the file, an absolute path; default
//     Entry.File.
//
// Observe reports the first line "key=…" of the file; a missing file or
// line does not exist. Create and Update replace that line (dropping later
// duplicates) or append one; Delete removes every line of the key. Both
// rewrite the file atomically (a temporary file renamed over it), keeping
// its mode and every other line.
//
// Entry is safe for concurrent use: writes to one file are serialised.
type Entry struct {
	// File is the absolute path of the environment file; its directory is
	// created when missing.
	File string
	// Release, when not empty, is the adapter's release: every write
	// keeps "# <HeaderMark> <release>" as the file's first line (replacing
	// the header of another release), so the file says which release
	// last wrote it.
	Release string
}

// HeaderMark starts the comment line that names the adapter's release.
const HeaderMark = "written by intend's kv adapter"

var _ adapters.Handler = Entry{}

// keyPattern is what a key may be.
var keyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// spec is the validated desired state of one entry.
type spec struct {
	key, value string
}

// parse validates desired and reports every problem at once, each naming
// its attribute, as a permanent error: retrying cannot fix an attribute.
// It returns the Entry of desired's file.
func (e Entry) parse(desired adapters.Resource) (Entry, spec, error) {
	var errs []error
	if f, ok := desired.Attributes["file"]; ok {
		switch str, isString := f.(string); {
		case !isString:
			errs = append(errs, fmt.Errorf(`attribute "file": must be a string, got %T`, f))
		case !filepath.IsAbs(str) || filepath.Clean(str) != str:
			errs = append(errs, fmt.Errorf(`attribute "file": %q is not an absolute, clean path`, str))
		default:
			e.File = str
		}
	} else if !filepath.IsAbs(e.File) {
		errs = append(errs, fmt.Errorf("the executor's kv file %q is not an absolute path", e.File))
	}
	var s spec
	for name := range desired.Attributes {
		if name != "key" && name != "value" && name != "file" {
			errs = append(errs, fmt.Errorf("attribute %q is unknown (kv::Entry has key, value and file)", name))
		}
	}
	switch k, ok := desired.Attributes["key"].(string); {
	case !ok:
		errs = append(errs, errors.New(`attribute "key": required, a string`))
	case !keyPattern.MatchString(k):
		errs = append(errs, fmt.Errorf(`attribute "key": %q is not a name like PORT or db_host`, k))
	case k != desired.ID.Value:
		errs = append(errs, fmt.Errorf(`attribute "key": %q differs from the id's %q`, k, desired.ID.Value))
	default:
		s.key = k
	}
	switch v, ok := desired.Attributes["value"]; {
	case !ok && !desired.Purged:
		errs = append(errs, errors.New(`attribute "value": required`))
	case !ok:
	default:
		str, isString := v.(string)
		switch {
		case !isString:
			errs = append(errs, fmt.Errorf(`attribute "value": must be a string, got %T`, v))
		case strings.ContainsAny(str, "\r\n\x00"):
			errs = append(errs, errors.New(`attribute "value": must be one line`))
		default:
			s.value = str
		}
	}
	if len(errs) > 0 {
		return e, spec{}, adapters.Permanent(fmt.Errorf("invalid %s: %w", EntryType, errors.Join(errs...)))
	}
	return e, s, nil
}

// Observe reports the entry's line, if there is one. It changes nothing.
func (e Entry) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	e, s, err := e.parse(desired)
	if err != nil {
		return adapters.Observation{}, err
	}
	lines, _, err := e.read()
	if err != nil {
		return adapters.Observation{}, err
	}
	for i, l := range lines {
		if v, ok := strings.CutPrefix(l, s.key+"="); ok {
			hc.SetFact("line", i+1)
			return adapters.Observation{Exists: true, Attributes: map[string]any{"key": s.key, "value": v}}, nil
		}
	}
	return adapters.Observation{Exists: false}, nil
}

// Create writes the entry.
func (e Entry) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	return e.set(ctx, hc, desired)
}

// Update writes the entry; the diff is not needed, a line is one value.
func (e Entry) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, _ adapters.Diff) error {
	return e.set(ctx, hc, desired)
}

// set replaces the key's first line, drops the others, or appends one.
func (e Entry) set(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	e, s, err := e.parse(desired)
	if err != nil {
		return err
	}
	return e.rewrite(ctx, func(lines []string) []string {
		line := s.key + "=" + s.value
		out, found := lines[:0:0], false
		for _, l := range lines {
			if strings.HasPrefix(l, s.key+"=") {
				if found {
					continue
				}
				l, found = line, true
			}
			out = append(out, l)
		}
		if !found {
			out = append(out, line)
		}
		hc.Info("entry written", "file", e.File, "key", s.key)
		return out
	})
}

// Delete removes every line of the key; an absent line or file is done.
func (e Entry) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	e, s, err := e.parse(desired)
	if err != nil {
		return err
	}
	return e.rewrite(ctx, func(lines []string) []string {
		out := lines[:0:0]
		for _, l := range lines {
			if !strings.HasPrefix(l, s.key+"=") {
				out = append(out, l)
			}
		}
		hc.Info("entry removed", "file", e.File, "key", s.key)
		return out
	})
}

// locks serialises the writes to each file: resources of one file are
// deployed concurrently.
var locks sync.Map // file path → *sync.Mutex

// rewrite applies edit to the file's lines under the file's lock and
// renames the result over the file, unless nothing changed.
func (e Entry) rewrite(ctx context.Context, edit func([]string) []string) error {
	mu, _ := locks.LoadOrStore(e.File, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	lines, mode, err := e.read()
	if err != nil {
		return err
	}
	before := len(lines)
	joined := strings.Join(lines, "\n")
	lines = e.header(edit(lines))
	if len(lines) == before && strings.Join(lines, "\n") == joined {
		return nil // already as desired: a repeat after a crash writes nothing
	}
	if err := ctx.Err(); err != nil {
		return adapters.Transient(err)
	}
	if mode == 0 {
		mode = 0o644
	}
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	dir := filepath.Dir(e.File)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return adapters.Transient(fmt.Errorf("create %s: %w", dir, err))
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(e.File)+".*")
	if err != nil {
		return adapters.Transient(fmt.Errorf("write %s: %w", e.File, err))
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		return adapters.Transient(fmt.Errorf("write %s: %w", e.File, err))
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return adapters.Transient(fmt.Errorf("write %s: %w", e.File, err))
	}
	if err := tmp.Close(); err != nil {
		return adapters.Transient(fmt.Errorf("write %s: %w", e.File, err))
	}
	if err := os.Rename(tmp.Name(), e.File); err != nil {
		return adapters.Transient(fmt.Errorf("write %s: %w", e.File, err))
	}
	return nil
}

// header puts the release's header first in lines, replacing another
// release's.
func (e Entry) header(lines []string) []string {
	if e.Release == "" {
		return lines
	}
	h := "# " + HeaderMark + " " + e.Release
	if len(lines) > 0 && strings.HasPrefix(lines[0], "# "+HeaderMark+" ") {
		lines[0] = h
		return lines
	}
	return append([]string{h}, lines...)
}

// read returns the file's lines and mode; a missing file has no lines and
// mode 0.
func (e Entry) read() ([]string, os.FileMode, error) {
	f, err := os.Open(e.File)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, adapters.Transient(fmt.Errorf("read %s: %w", e.File, err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, adapters.Transient(fmt.Errorf("read %s: %w", e.File, err))
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, adapters.Permanent(fmt.Errorf("%s is not a regular file", e.File))
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, 0, adapters.Transient(fmt.Errorf("read %s: %w", e.File, err))
	}
	return lines, fi.Mode().Perm(), nil
}
