package netconf

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The data model: a configuration subtree as JSON-like data, in the
// shape of RFC 7951 (YANG's JSON encoding). Containers are objects,
// lists are arrays of objects carrying their keys, leaf-lists are arrays
// of scalars, leaves are scalars (a string, number or boolean; null for
// a leaf of type empty). A member is named "module:name" where its
// module differs from its parent's, and every top-level member is so
// named; an identity is written "module:identity". A module's XML
// namespace is looked up in the resource's namespaces, then in the
// IETF's rule (urn:ietf:params:xml:ns:yang:<module> for ietf- and iana-
// modules).

// ncBase is the NETCONF base namespace, of the operation attribute.
const ncBase = "urn:ietf:params:xml:ns:netconf:base:1.0"

// ietfNS is the namespace prefix of IETF and IANA modules.
const ietfNS = "urn:ietf:params:xml:ns:yang:"

// maxDepth bounds the nesting of the data and of a parsed reply.
const maxDepth = 128

// builtinKeys are the keys of the lists of the modules the standard
// library types (by their schema path: local names joined by "/").
var builtinKeys = map[string][]string{
	"interfaces/interface":                            {"name"},
	"interfaces/interface/ipv4/address":               {"ip"},
	"interfaces/interface/ipv4/neighbor":              {"ip"},
	"interfaces/interface/ipv6/address":               {"ip"},
	"interfaces/interface/ipv6/neighbor":              {"ip"},
	"system/ntp/server":                               {"name"},
	"system/dns-resolver/server":                      {"name"},
	"system/authentication/user":                      {"name"},
	"system/authentication/user/authorized-key":       {"name"},
	"system/radius/server":                            {"name"},
	"system/clock/timezone-name":                      nil,
	"system/authentication/user-authentication-order": nil,
}

// schema is what the adapter knows of the modules of one resource.
type schema struct {
	ns   map[string]string   // module -> namespace
	mod  map[string]string   // namespace -> module
	keys map[string][]string // list schema path -> key leaves (nil: not a keyed list)
}

func newSchema(namespaces map[string]string, keys map[string][]string) *schema {
	s := &schema{ns: map[string]string{}, mod: map[string]string{}, keys: maps.Clone(builtinKeys)}
	for m, u := range namespaces {
		s.ns[m] = u
		s.mod[u] = m
	}
	maps.Copy(s.keys, keys)
	return s
}

// namespace returns a module's namespace, or "" when unknown.
func (s *schema) namespace(module string) string {
	if u, ok := s.ns[module]; ok {
		return u
	}
	if strings.HasPrefix(module, "ietf-") || strings.HasPrefix(module, "iana-") {
		return ietfNS + module
	}
	return ""
}

// module returns the module of a namespace ("" when unknown).
func (s *schema) module(ns string) string {
	if m, ok := s.mod[ns]; ok {
		return m
	}
	if m, ok := strings.CutPrefix(ns, ietfNS); ok && (strings.HasPrefix(m, "ietf-") || strings.HasPrefix(m, "iana-")) {
		return m
	}
	return ""
}

// splitName splits "module:name" (module "" when unqualified).
func splitName(n string) (module, local string) {
	if m, l, ok := strings.Cut(n, ":"); ok {
		return m, l
	}
	return "", n
}

// validName reports whether s is a YANG identifier.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case i > 0 && (r == '-' || r == '.' || r >= '0' && r <= '9'):
		default:
			return false
		}
	}
	return true
}

// checkData validates desired configuration data: qualified top-level
// names of known modules, valid names, arrays all of objects or all of
// scalars, scalars of JSON's kinds, bounded depth. It names the path of
// what it refuses.
func (s *schema) checkData(v any) error {
	top, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("is %s, want an object of top-level nodes", kindOf(v))
	}
	if len(top) == 0 {
		return errors.New("is empty")
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		m, _ := splitName(k)
		if m == "" {
			return fmt.Errorf("%s: a top-level node is named with its module (\"module:%s\")", k, k)
		}
	}
	return s.checkObject(top, "", 0)
}

func (s *schema) checkObject(o map[string]any, path string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: nested deeper than %d", path, maxDepth)
	}
	for _, k := range slices.Sorted(maps.Keys(o)) {
		p := join(path, k)
		m, l := splitName(k)
		if strings.Count(k, ":") > 1 || !validName(l) || m != "" && !validName(m) {
			return fmt.Errorf("%s: not a YANG node name (\"name\" or \"module:name\")", p)
		}
		if m != "" && s.namespace(m) == "" {
			return fmt.Errorf("%s: module %s has no namespace: give it in namespaces", p, m)
		}
		switch t := o[k].(type) {
		case map[string]any:
			if err := s.checkObject(t, p, depth+1); err != nil {
				return err
			}
		case []any:
			objects := 0
			for i, e := range t {
				switch et := e.(type) {
				case map[string]any:
					objects++
					if err := s.checkObject(et, fmt.Sprintf("%s[%d]", p, i+1), depth+1); err != nil {
						return err
					}
				case []any:
					return fmt.Errorf("%s[%d]: a list in a list", p, i+1)
				default:
					if err := checkScalar(e); err != nil {
						return fmt.Errorf("%s[%d]: %w", p, i+1, err)
					}
				}
			}
			if objects != 0 && objects != len(t) {
				return fmt.Errorf("%s: mixes list entries (objects) and leaf-list values", p)
			}
		default:
			if err := checkScalar(t); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	return nil
}

func checkScalar(v any) error {
	switch t := v.(type) {
	case nil, bool, json.Number, int, int64:
		return nil
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return errors.New("not a finite number")
		}
		return nil
	case string:
		if strings.ContainsFunc(t, func(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' && r != '\r' }) {
			return errors.New("holds a control character XML cannot carry")
		}
		return nil
	}
	return fmt.Errorf("is %s, want a scalar", kindOf(v))
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case json.Number, float64, int, int64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func join(path, seg string) string {
	if path == "" {
		return seg
	}
	return path + "/" + seg
}

// text is a scalar's XML text.
func text(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case json.Number:
		return t.String()
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case int:
		return strconv.Itoa(t)
	case int64:
		return strconv.FormatInt(t, 10)
	}
	return fmt.Sprint(v)
}

// step is one node of a path: its name as written, and the key
// predicates of a list entry.
type step struct {
	name string
	keys [][2]string
}

// parsePath parses "module:a/b[k=v][k2=v2]/c" into steps.
func parsePath(p string) ([]step, error) {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return nil, errors.New("want module:node/node[key=value]/…, not empty and without a leading or trailing /")
	}
	var out []step
	for rest := p; rest != ""; {
		var st step
		i := strings.IndexAny(rest, "/[")
		if i < 0 {
			i = len(rest)
		}
		st.name, rest = rest[:i], rest[i:]
		for strings.HasPrefix(rest, "[") {
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("%q: a [ without its ]", p)
			}
			k, v, ok := strings.Cut(rest[1:end], "=")
			if !ok || !validName(k) || v == "" {
				return nil, fmt.Errorf("%q: a predicate is [key=value]", p)
			}
			st.keys = append(st.keys, [2]string{k, v})
			rest = rest[end+1:]
		}
		m, l := splitName(st.name)
		if strings.Count(st.name, ":") > 1 || !validName(l) || m != "" && !validName(m) {
			return nil, fmt.Errorf("%q: %q is not a node name", p, st.name)
		}
		if len(out) == 0 && m == "" {
			return nil, fmt.Errorf("%q: the first node is named with its module (\"module:%s\")", p, l)
		}
		out = append(out, st)
		if rest != "" {
			if rest[0] != '/' || len(rest) == 1 {
				return nil, fmt.Errorf("%q: nodes are separated by /", p)
			}
			rest = rest[1:]
		}
	}
	return out, nil
}

// checkOwned checks that data is exactly the chain of path's nodes down
// to the owned node, which holds the subtree: every object above it has
// only the next node (and a list entry its keys besides), every list
// above it and the owned list entry only the one entry the path names.
func checkOwned(data map[string]any, steps []step) error {
	cur := data
	for i, st := range steps {
		last := i == len(steps)-1
		allowed := map[string]bool{st.name: true}
		if i > 0 {
			for _, k := range steps[i-1].keys {
				allowed[k[0]] = true
			}
		}
		for k := range cur {
			if !allowed[k] {
				return fmt.Errorf("holds %s beside the path's node %s: a resource owns one subtree", k, st.name)
			}
		}
		v, ok := cur[st.name]
		if !ok {
			return fmt.Errorf("has no %s, the path's node", st.name)
		}
		if len(st.keys) > 0 {
			list, ok := v.([]any)
			if !ok || len(list) != 1 {
				return fmt.Errorf("%s: want a list of exactly the one entry the path names", st.name)
			}
			e, ok := list[0].(map[string]any)
			if !ok {
				return fmt.Errorf("%s: want a list entry (an object)", st.name)
			}
			for _, k := range st.keys {
				if ev, ok := e[k[0]]; !ok || text(ev) != k[1] {
					return fmt.Errorf("%s: the entry's %s is not %q, the path's", st.name, k[0], k[1])
				}
			}
			v = e
		} else if _, isList := v.([]any); isList && !last {
			return fmt.Errorf("%s: a list on the path needs its keys ([key=value])", st.name)
		}
		if last {
			return nil
		}
		next, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object (a container or list entry) on the path", st.name)
		}
		cur = next
	}
	return nil
}

// owned returns the owned node in data (observed, normalised), if there.
func owned(data map[string]any, steps []step) (any, bool) {
	var cur any = data
	for _, st := range steps {
		o, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok := o[st.name]
		if !ok {
			return nil, false
		}
		if len(st.keys) > 0 {
			list, _ := v.([]any)
			v = nil
			for _, e := range list {
				eo, _ := e.(map[string]any)
				match := eo != nil
				for _, k := range st.keys {
					if ev, ok := eo[k[0]]; !ok || text(ev) != k[1] {
						match = false
					}
				}
				if match {
					v = e
					break
				}
			}
			if v == nil {
				return nil, false
			}
		}
		cur = v
	}
	return cur, true
}

// normalize returns data with every member named as RFC 7951 names it:
// qualified exactly where its module differs from its parent's.
func normalize(data map[string]any) map[string]any {
	return normObject(data, "")
}

func normObject(o map[string]any, parent string) map[string]any {
	out := make(map[string]any, len(o))
	for k, v := range o {
		m, l := splitName(k)
		if m == "" {
			m = parent
		}
		name := l
		if m != parent {
			name = m + ":" + l
		}
		switch t := v.(type) {
		case map[string]any:
			v = normObject(t, m)
		case []any:
			list := make([]any, len(t))
			for i, e := range t {
				if eo, ok := e.(map[string]any); ok {
					list[i] = normObject(eo, m)
				} else {
					list[i] = e
				}
			}
			v = list
		}
		out[name] = v
	}
	return out
}

// render writes data (normalised) as the XML content of <config>, with
// nc:operation="op" on the node at the owned path when op is not "".
// Members are written in sorted order, list entries in their order.
func (s *schema) render(data map[string]any, steps []step, op string) []byte {
	var b bytes.Buffer
	r := renderer{s: s, b: &b, op: op, at: pathString(steps)}
	r.object(data, "", "", "")
	return b.Bytes()
}

// filter writes the subtree filter that selects the owned node: the
// path's containers, and its list entries by their keys.
func (s *schema) filter(steps []step) []byte {
	var b bytes.Buffer
	var ns string
	for _, st := range steps {
		m, l := splitName(st.name)
		b.WriteString("<" + l)
		if m != "" && s.namespace(m) != ns {
			ns = s.namespace(m)
			b.WriteString(` xmlns="` + escape(ns) + `"`)
		}
		b.WriteString(">")
		for _, k := range st.keys {
			b.WriteString("<" + k[0] + ">" + escape(k[1]) + "</" + k[0] + ">")
		}
	}
	for i := len(steps) - 1; i >= 0; i-- {
		_, l := splitName(steps[i].name)
		b.WriteString("</" + l + ">")
	}
	return b.Bytes()
}

// normSteps names the path's nodes as normalize names members, and
// returns the keys its predicates name, by list schema path.
func normSteps(steps []step) ([]step, map[string][]string) {
	out := make([]step, len(steps))
	keys := map[string][]string{}
	parent := ""
	var sp string
	for i, st := range steps {
		m, l := splitName(st.name)
		if m == "" {
			m = parent
		}
		name := l
		if m != parent {
			name = m + ":" + l
		}
		parent = m
		sp = join(sp, l)
		out[i] = step{name: name, keys: st.keys}
		if len(st.keys) > 0 {
			for _, k := range st.keys {
				keys[sp] = append(keys[sp], k[0])
			}
		}
	}
	return out, keys
}

func pathString(steps []step) string {
	var parts []string
	for _, st := range steps {
		p := st.name
		for _, k := range st.keys {
			p += "[" + k[0] + "=" + k[1] + "]"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "/")
}

type renderer struct {
	s  *schema
	b  *bytes.Buffer
	op string
	at string // the owned node's path
}

func (r *renderer) object(o map[string]any, ns, module, path string) {
	for _, k := range slices.Sorted(maps.Keys(o)) {
		m, l := splitName(k)
		cns, cmod := ns, module
		if m != "" {
			cmod, cns = m, r.s.namespace(m)
		}
		p := join(path, k)
		switch t := o[k].(type) {
		case []any:
			for _, e := range t {
				if eo, ok := e.(map[string]any); ok {
					ep := p + r.predicates(eo, k, path)
					r.open(l, cns, ns, ep, nil)
					r.object(eo, cns, cmod, ep)
					r.b.WriteString("</" + l + ">")
				} else {
					r.leaf(l, cns, ns, p, e)
				}
			}
		case map[string]any:
			r.open(l, cns, ns, p, nil)
			r.object(t, cns, cmod, p)
			r.b.WriteString("</" + l + ">")
		default:
			r.leaf(l, cns, ns, p, t)
		}
	}
}

// predicates returns "[k=v]…" of a list entry (its keys, by the
// schema; none for a list without known keys).
func (r *renderer) predicates(e map[string]any, name, parentPath string) string {
	keys := r.s.keys[schemaPath(join(parentPath, name))]
	var p string
	for _, k := range keys {
		p += "[" + k + "=" + text(e[k]) + "]"
	}
	return p
}

// schemaPath drops modules and predicates from a data path.
func schemaPath(p string) string {
	var out []string
	depth := 0
	var cur strings.Builder
	for _, r := range p {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth > 0:
		case r == '/':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	out = append(out, cur.String())
	for i, s := range out {
		_, out[i] = splitName(s)
	}
	return strings.Join(out, "/")
}

func (r *renderer) open(local, ns, parentNS, path string, extra []string) {
	r.b.WriteString("<" + local)
	if ns != parentNS {
		r.b.WriteString(` xmlns="` + escape(ns) + `"`)
	}
	for _, e := range extra {
		r.b.WriteString(" " + e)
	}
	if r.op != "" && path == r.at {
		r.b.WriteString(` xmlns:nc="` + ncBase + `" nc:operation="` + r.op + `"`)
	}
	r.b.WriteString(">")
}

func (r *renderer) leaf(local, ns, parentNS, path string, v any) {
	var extra []string
	t := text(v)
	if s, ok := v.(string); ok {
		// An identity ("module:name"): its prefix is the module's name.
		if m, _, ok := strings.Cut(s, ":"); ok && validName(m) {
			if u := r.s.namespace(m); u != "" {
				extra = append(extra, `xmlns:`+m+`="`+escape(u)+`"`)
			}
		}
	}
	r.open(local, ns, parentNS, path, extra)
	r.b.WriteString(escape(t))
	r.b.WriteString("</" + local + ">")
}

func escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// elem is a parsed XML element.
type elem struct {
	ns, local string
	decl      map[string]string // prefixes declared on it
	scope     map[string]string // prefixes in scope
	children  []*elem
	text      string
}

// parseXML parses a sequence of elements (the content of <data>).
func parseXML(b []byte) ([]*elem, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	root := &elem{scope: map[string]string{}}
	stack := []*elem{root}
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reply: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) > maxDepth {
				return nil, fmt.Errorf("reply: nested deeper than %d", maxDepth)
			}
			parent := stack[len(stack)-1]
			e := &elem{local: t.Name.Local, decl: map[string]string{}, scope: parent.scope}
			defNS, hasDef := "", false
			for _, a := range t.Attr {
				switch {
				case a.Name.Space == "" && a.Name.Local == "xmlns":
					defNS, hasDef = a.Value, true
				case a.Name.Space == "xmlns":
					e.decl[a.Name.Local] = a.Value
				}
			}
			if len(e.decl) > 0 || hasDef {
				e.scope = maps.Clone(parent.scope)
				maps.Copy(e.scope, e.decl)
				if hasDef {
					e.scope[""] = defNS
				}
			}
			if t.Name.Space != "" {
				e.ns = e.scope[t.Name.Space]
			} else {
				e.ns = e.scope[""]
			}
			parent.children = append(parent.children, e)
			stack = append(stack, e)
		case xml.EndElement:
			if len(stack) == 1 {
				return nil, errors.New("reply: an end tag without its start")
			}
			stack = stack[:len(stack)-1]
		case xml.CharData:
			e := stack[len(stack)-1]
			if e != root && len(e.text) < 1<<20 {
				e.text += string(t)
			}
		case xml.Directive:
			return nil, errors.New("reply: a DTD or other directive")
		}
	}
	if len(stack) != 1 {
		return nil, errors.New("reply: an element without its end tag")
	}
	return root.children, nil
}

// parseData turns parsed elements into data, guided by the shape of
// guide (the desired data, normalised; may be nil) and the schema's
// keys: an element repeated, known as a list, or a list in guide
// becomes an array; one with children an object; others a leaf.
func (s *schema) parseData(els []*elem, guide map[string]any) map[string]any {
	return s.dataOf(els, "", "", guide)
}

func (s *schema) dataOf(els []*elem, parentNS, sp string, guide map[string]any) map[string]any {
	out := map[string]any{}
	type group struct {
		name string
		els  []*elem
	}
	var groups []*group
	byName := map[string]*group{}
	for _, e := range els {
		name := e.local
		if e.ns != parentNS || parentNS == "" {
			m := s.module(e.ns)
			if m == "" {
				m = e.ns // unknown: never matches a desired name
			}
			name = m + ":" + e.local
		}
		g := byName[name]
		if g == nil {
			g = &group{name: name}
			byName[name] = g
			groups = append(groups, g)
		}
		g.els = append(g.els, e)
	}
	for _, g := range groups {
		csp := join(sp, g.els[0].local)
		gv := guide[g.name]
		_, guideList := gv.([]any)
		_, keyed := s.keys[csp]
		if len(g.els) > 1 || guideList || keyed {
			var glist []any
			if l, ok := gv.([]any); ok {
				glist = l
			}
			var list []any
			for i, e := range g.els {
				var eg any
				if i < len(glist) {
					eg = glist[i]
				} else if len(glist) > 0 {
					eg = glist[0]
				}
				list = append(list, s.value(e, csp, eg))
			}
			out[g.name] = list
			continue
		}
		out[g.name] = s.value(g.els[0], csp, gv)
	}
	return out
}

func (s *schema) value(e *elem, sp string, guide any) any {
	if len(e.children) > 0 {
		g, _ := guide.(map[string]any)
		return s.dataOf(e.children, e.ns, sp, g)
	}
	if _, ok := guide.(map[string]any); ok {
		return map[string]any{} // a presence container
	}
	t := strings.TrimSpace(e.text)
	// An identity: its prefix declared on the leaf, or the desired value
	// one of a known module.
	if p, name, ok := strings.Cut(t, ":"); ok {
		_, declared := e.decl[p]
		gs, _ := guide.(string)
		gm, _, _ := strings.Cut(gs, ":")
		if u, inScope := e.scope[p]; inScope && (declared || gm != "" && s.namespace(gm) == u) {
			if m := s.module(u); m != "" {
				t = m + ":" + name
			}
		}
	}
	return typed(t, guide)
}

// typed returns text as the kind of guide (a number or boolean when the
// desired value is one and the text reads as one), else as a string; an
// empty leaf for a null guide.
func typed(t string, guide any) any {
	switch guide.(type) {
	case nil:
		if t == "" {
			return nil
		}
	case bool:
		if b, err := strconv.ParseBool(t); err == nil && (t == "true" || t == "false") {
			return b
		}
	case json.Number, float64, int, int64:
		if _, err := strconv.ParseFloat(t, 64); err == nil {
			return json.Number(t)
		}
	}
	return t
}

// flatten returns the leaves of data by path: a leaf-list is one leaf
// (its values, sorted), a keyed list entry is addressed by its keys,
// an entry of a list without known keys by its position, an empty
// object (a presence container) is a leaf.
func (s *schema) flatten(data map[string]any) map[string]any {
	out := map[string]any{}
	s.flatObject(data, "", out)
	return out
}

func (s *schema) flatObject(o map[string]any, path string, out map[string]any) {
	for k, v := range o {
		p := join(path, k)
		switch t := v.(type) {
		case map[string]any:
			if len(t) == 0 {
				out[p] = map[string]any{}
				continue
			}
			s.flatObject(t, p, out)
		case []any:
			if len(t) == 0 {
				continue
			}
			if _, ok := t[0].(map[string]any); ok {
				keys := s.keys[schemaPath(p)]
				for i, e := range t {
					eo, _ := e.(map[string]any)
					ep := p
					if len(keys) == 0 {
						ep += "[" + strconv.Itoa(i+1) + "]"
					}
					for _, kn := range keys {
						ep += "[" + kn + "=" + text(eo[kn]) + "]"
					}
					s.flatObject(eo, ep, out)
				}
				continue
			}
			vals := slices.Clone(t)
			slices.SortFunc(vals, func(a, b any) int { return strings.Compare(text(a), text(b)) })
			out[p] = vals
		default:
			out[p] = t
		}
	}
}

// leafEqual compares two leaves by their XML text.
func leafEqual(a, b any) bool {
	la, aList := a.([]any)
	lb, bList := b.([]any)
	if aList || bList {
		if !aList || !bList || len(la) != len(lb) {
			return false
		}
		for i := range la {
			if text(la[i]) != text(lb[i]) {
				return false
			}
		}
		return true
	}
	_, aObj := a.(map[string]any)
	_, bObj := b.(map[string]any)
	if aObj || bObj {
		return aObj && bObj
	}
	return text(a) == text(b)
}

// diffData returns the per-leaf changes from observed to desired (both
// normalised), by path. With exact (operation "replace"), a leaf
// observed under the owned node and not desired is a change too.
func (s *schema) diffData(desired, observed map[string]any, owned string, exact bool) map[string][2]any {
	want := s.flatten(desired)
	got := map[string]any{}
	if observed != nil {
		got = s.flatten(observed)
	}
	out := map[string][2]any{}
	for p, w := range want {
		g, ok := got[p]
		if !ok || !leafEqual(w, g) {
			if !ok {
				g = nil
			}
			out[p] = [2]any{g, w}
		}
	}
	if exact {
		for p, g := range got {
			if _, ok := want[p]; !ok && (p == owned || strings.HasPrefix(p, owned+"/") || strings.HasPrefix(p, owned+"[")) {
				out[p] = [2]any{g, nil}
			}
		}
	}
	return out
}
