package project

import (
	"fmt"
	"regexp"
	"strings"

	"cuelabs.dev/go/oci/ociregistry/ociref"
)

// Module is one entry of intend.yaml's modules: a module the project
// uses (directly or through another module's requires), where it comes
// from and at which version. internal/modules resolves them.
type Module struct {
	// Name is the module's name, as its intend-module.yaml has it.
	Name string `yaml:"name"`
	// Source is a directory relative to the project ("./modules/kv",
	// "../kv"), a git repository at a tag:
	// "git+https://example.com/kv.git@v1.2.0" (git+ssh:// and, for
	// tests and local mirrors, git+file:// too), or a CUE module in an
	// OCI registry at a version, as `cue mod publish` put it there:
	// "oci://registry.example.com/mods/example.com/kv@v1.2.0" (the
	// registry's host, then the repository: a prefix and the CUE
	// module path).
	Source string `yaml:"source"`
	// Version is the module's version (semver, "v1.2.0"): its
	// intend-module.yaml must say the same. Optional for a directory.
	Version string `yaml:"version,omitempty"`
}

// SemverPattern is what a module version looks like: v1.2.0, v1.2.0-rc.1.
var SemverPattern = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// IsGitSource reports whether a module source names a git repository.
func IsGitSource(s string) bool { return strings.HasPrefix(s, "git+") }

// IsOCISource reports whether a module source names a CUE module in an
// OCI registry.
func IsOCISource(s string) bool { return strings.HasPrefix(s, "oci://") }

// SplitOCISource splits "oci://host[:port]/repo/sitory@v1.2.0" into the
// registry's host ("host[:port]"), the repository ("repo/sitory") and
// the version, which is the tag `cue mod publish` gave it.
func SplitOCISource(s string) (host, repo, version string, err error) {
	rest, _ := strings.CutPrefix(s, "oci://")
	i := strings.LastIndex(rest, "@")
	host, path, ok := strings.Cut(rest[:max(i, 0)], "/")
	if !IsOCISource(s) || i < 0 || !ok {
		return "", "", "", fmt.Errorf("%q: want oci://<registry host>/<repository>@<version>, such as oci://registry.example.com/mods/example.com/kv@v1.2.0", s)
	}
	version = rest[i+1:]
	switch {
	case !ociref.IsValidHost(host):
		return "", "", "", fmt.Errorf("%q: %q is not a registry host (host or host:port)", s, host)
	case !ociref.IsValidRepository(path):
		return "", "", "", fmt.Errorf("%q: %q is not a repository (lower-case path elements: mods/example.com/kv)", s, path)
	case !SemverPattern.MatchString(version):
		return "", "", "", fmt.Errorf("%q: %q is not a version (a CUE module's tag is its version: v1.2.0)", s, version)
	}
	return host, path, version, nil
}

// checkModules checks intend.yaml's modules: each with a name, a source
// and (for git) a version, and no name twice.
func checkModules(ms []Module, bad func(key, msg string)) {
	seen := map[string]int{}
	for i, m := range ms {
		key := fmt.Sprintf("modules[%d]", i)
		if !namePattern.MatchString(m.Name) {
			bad(key+".name", fmt.Sprintf("%q: lower-case letters, digits, - and _, starting with a letter or digit, at most 63", m.Name))
		} else if j, dup := seen[m.Name]; dup {
			bad(key+".name", fmt.Sprintf("module %s is listed twice (modules[%d] too): a project uses one version of a module", m.Name, j))
		} else {
			seen[m.Name] = i
		}
		if m.Version != "" && !SemverPattern.MatchString(m.Version) {
			bad(key+".version", fmt.Sprintf("%q: want a semantic version such as v1.2.0", m.Version))
		}
		switch {
		case m.Source == "":
			bad(key+".source", "required: a directory relative to the project (./modules/kv), git+https://…@<tag> or oci://<registry>/<repository>@<version>")
		case IsGitSource(m.Source):
			if m.Version == "" {
				bad(key+".version", "required for a git module (the version its tag holds)")
			}
			if _, _, err := SplitGitSource(m.Source); err != nil {
				bad(key+".source", err.Error())
			}
		case IsOCISource(m.Source):
			if _, _, v, err := SplitOCISource(m.Source); err != nil {
				bad(key+".source", err.Error())
			} else if m.Version != v {
				bad(key+".version", fmt.Sprintf("%q: an OCI module's version is the one its source names (%s)", m.Version, v))
			}
		case strings.Contains(m.Source, "://"):
			bad(key+".source", fmt.Sprintf("%q: want a directory relative to the project, git+https://…@<tag> or oci://<registry>/<repository>@<version>", m.Source))
		}
	}
}

// SplitGitSource splits "git+https://host/repo.git@v1.2.0" into the URL
// git fetches ("https://host/repo.git") and the tag ("v1.2.0").
func SplitGitSource(s string) (url, tag string, err error) {
	rest, ok := strings.CutPrefix(s, "git+")
	i := strings.LastIndex(rest, "@")
	if !ok || i < 0 || i == len(rest)-1 || strings.Contains(rest[i:], "/") {
		return "", "", fmt.Errorf("%q: want git+<url>@<tag>, such as git+https://example.com/kv.git@v1.2.0", s)
	}
	url, tag = rest[:i], rest[i+1:]
	scheme, _, _ := strings.Cut(url, "://")
	switch scheme {
	case "https", "ssh", "file":
	default:
		return "", "", fmt.Errorf("%q: git over https, ssh or file only", s)
	}
	if strings.HasPrefix(tag, "-") || strings.ContainsAny(tag, " \t\n:^~?*[\\") {
		return "", "", fmt.Errorf("%q: %q is not a tag name", s, tag)
	}
	return url, tag, nil
}
