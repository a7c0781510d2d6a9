package project

import (
	"fmt"
	"regexp"
	"strings"
)

// Module is one entry of intend.yaml's modules: a module the project
// uses (directly or through another module's requires), where it comes
// from and at which version. internal/modules resolves them.
type Module struct {
	// Name is the module's name, as its intend-module.yaml has it.
	Name string `yaml:"name"`
	// Source is a directory relative to the project ("./modules/kv",
	// "../kv"), or a git repository at a tag:
	// "git+https://example.com/kv.git@v1.2.0" (git+ssh:// and, for
	// tests and local mirrors, git+file:// too).
	Source string `yaml:"source"`
	// Version is the module's version (semver, "v1.2.0"): its
	// intend-module.yaml must say the same. Optional for a directory.
	Version string `yaml:"version,omitempty"`
}

// SemverPattern is what a module version looks like: v1.2.0, v1.2.0-rc.1.
var SemverPattern = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// IsGitSource reports whether a module source names a git repository.
func IsGitSource(s string) bool { return strings.HasPrefix(s, "git+") }

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
			bad(key+".source", "required: a directory relative to the project (./modules/kv) or git+https://…@<tag>")
		case IsGitSource(m.Source):
			if m.Version == "" {
				bad(key+".version", "required for a git module (the version its tag holds)")
			}
			if _, _, err := SplitGitSource(m.Source); err != nil {
				bad(key+".source", err.Error())
			}
		case strings.Contains(m.Source, "://"):
			bad(key+".source", fmt.Sprintf("%q: want a directory relative to the project or git+https://…@<tag>", m.Source))
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
