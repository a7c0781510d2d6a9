// Package project reads an intend project: a directory with intend.yaml
// (what the project is: its name, the environment it deploys to, the
// server, the CUE package to compile) and, optionally, a .intend file
// (where a developer's CLI pushes to: server address, token, environment;
// seed 001's push-to-server mode). Both are decoded strictly: an unknown
// key is an error, since a misspelt setting silently ignored is worse.
package project

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// FileName is the project file.
const FileName = "intend.yaml"

// LocalFileName is the per-checkout CLI settings file.
const LocalFileName = ".intend"

// DefaultEnvironment is the environment of a project that names none.
const DefaultEnvironment = "dev"

// Project is intend.yaml.
type Project struct {
	// Name identifies the project on the server.
	Name string `yaml:"name"`
	// Environment is the environment compiles export to by default.
	Environment string `yaml:"environment,omitempty"`
	// Server is the intend server's base URL (http or https), if the
	// project pushes to one.
	Server string `yaml:"server,omitempty"`
	// Entry is the CUE package to compile: a slash-separated directory
	// relative to the project, "." by default.
	Entry string `yaml:"entry,omitempty"`
	// Modules are the modules the project uses (modules.go).
	Modules []Module `yaml:"modules,omitempty"`
}

// Local is .intend: a developer's CLI settings for this checkout.
type Local struct {
	Server      string `yaml:"server,omitempty"`
	Token       string `yaml:"token,omitempty"`
	Environment string `yaml:"environment,omitempty"`
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Error is a problem with one key of a project file.
type Error struct {
	File string // intend.yaml or .intend, with its directory
	Key  string // "" for the file as a whole
	Msg  string
}

func (e *Error) Error() string {
	if e.Key == "" {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s: %s: %s", e.File, e.Key, e.Msg)
}

// Load reads dir/intend.yaml. The result has its defaults filled in.
func Load(dir string) (Project, error) {
	file := filepath.Join(dir, FileName)
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return Project{}, &Error{File: file, Msg: "not found: is " + dir + " an intend project? (intend init creates one)"}
	}
	if err != nil {
		return Project{}, err
	}
	return Parse(file, b)
}

// Parse decodes and checks the content of an intend.yaml; file names it
// in errors.
func Parse(file string, b []byte) (Project, error) {
	var p Project
	if err := decodeStrict(b, &p); err != nil {
		return Project{}, &Error{File: file, Msg: err.Error()}
	}
	var errs []error
	bad := func(key, msg string) { errs = append(errs, &Error{File: file, Key: key, Msg: msg}) }
	switch {
	case p.Name == "":
		bad("name", "required")
	case !namePattern.MatchString(p.Name):
		bad("name", fmt.Sprintf("%q: lower-case letters, digits, - and _, starting with a letter or digit, at most 63", p.Name))
	}
	if p.Environment == "" {
		p.Environment = DefaultEnvironment
	} else if !namePattern.MatchString(p.Environment) {
		bad("environment", fmt.Sprintf("%q: lower-case letters, digits, - and _, starting with a letter or digit, at most 63", p.Environment))
	}
	if p.Server != "" {
		if msg := checkServer(p.Server); msg != "" {
			bad("server", msg)
		}
	}
	entry, msg := cleanEntry(p.Entry)
	if msg != "" {
		bad("entry", msg)
	}
	p.Entry = entry
	checkModules(p.Modules, bad)
	if len(errs) > 0 {
		return Project{}, errors.Join(errs...)
	}
	return p, nil
}

// LoadLocal reads dir/.intend; a missing file is an empty Local.
func LoadLocal(dir string) (Local, error) {
	file := filepath.Join(dir, LocalFileName)
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return Local{}, nil
	}
	if err != nil {
		return Local{}, err
	}
	var l Local
	if err := decodeStrict(b, &l); err != nil {
		return Local{}, &Error{File: file, Msg: err.Error()}
	}
	if l.Server != "" {
		if msg := checkServer(l.Server); msg != "" {
			return Local{}, &Error{File: file, Key: "server", Msg: msg}
		}
	}
	if l.Environment != "" && !namePattern.MatchString(l.Environment) {
		return Local{}, &Error{File: file, Key: "environment", Msg: fmt.Sprintf("%q is not an environment name", l.Environment)}
	}
	return l, nil
}

// Marshal renders p as intend.yaml.
func Marshal(p Project) ([]byte, error) {
	return yaml.Marshal(p)
}

func decodeStrict(b []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("more than one YAML document")
	}
	return nil
}

// checkServer returns why s is not an intend server base URL, or "".
func checkServer(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a URL", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q: want an http:// or https:// URL", s)
	case u.Host == "":
		return fmt.Sprintf("%q has no host", s)
	case u.User != nil:
		return "must not hold credentials (put the token in .intend or INTEND_TOKEN)"
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Sprintf("%q: a base URL has no query or fragment", s)
	}
	return ""
}

// cleanEntry normalises the entry package directory; it must stay inside
// the project.
func cleanEntry(e string) (string, string) {
	if e == "" {
		return ".", ""
	}
	if strings.Contains(e, `\`) || path.IsAbs(e) || filepath.IsAbs(e) {
		return "", fmt.Sprintf("%q: a slash-separated path relative to the project", e)
	}
	c := path.Clean(e)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Sprintf("%q leaves the project directory", e)
	}
	return c, ""
}
