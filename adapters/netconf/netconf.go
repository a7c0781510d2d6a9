// Package netconf holds the netconf::Config adapter: a subtree of one
// network device's configuration, owned by intend, managed over NETCONF
// (RFC 6241) over SSH (RFC 6242) with package session.
//
// The resource's desired state is structured data in the shape of YANG's
// JSON encoding (RFC 7951): containers are objects, lists arrays of
// objects carrying their keys, leaf-lists arrays of scalars, leaves
// scalars, and a member is named "module:name" where its module changes.
// Observing is <get-config> of the running datastore filtered to the
// subtree; the diff is computed on the data, per leaf, a list entry
// addressed by its keys ("interfaces/interface[name=eth1]/description"),
// so the order of a keyed list never matters.
//
// Every resource names its device with these attributes, which are not
// state of the device: Observe never reports them, so changing them
// never makes a diff.
//
//   - address (string, required): the device's host name or address,
//     and its NETCONF-over-SSH port when not 830 ("r1.lab:2830",
//     "[2001:db8::1]:830").
//   - user (string, required): the SSH user.
//   - password, private_key (string, optional): how the user
//     authenticates, at least one; give them as secret references. Both
//     are declared sensitive.
//   - host_key (string, required): the key the device must present, as an
//     authorized_keys line ("ssh-ed25519 AAAA…"), a known_hosts line or a
//     SHA256 fingerprint ("SHA256:…"); never trusted on first use.
package netconf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/netconf/session"
)

// ConfigType is the resource type of Config.
const ConfigType = "netconf::Config"

// Register adds netconf::Config to r.
func Register(r *adapters.Registry) { r.Register(ConfigType, Config{}) }

// Defaults of Config.
const (
	// DefaultMaxSessions bounds the sessions one executor process holds
	// to one device at once (one per version being deployed).
	DefaultMaxSessions = 2
	// DefaultGather is how long a transaction waits at most for the
	// edits of the device's other resources in flight, to commit them
	// together.
	DefaultGather = 250 * time.Millisecond
	// DefaultConfirmTimeout is the confirmed commit's timeout.
	DefaultConfirmTimeout = 60
)

// Config is netconf::Config: a subtree of one device's configuration.
// Its id is netconf::Config[<agent>,path=<path>]: give each device its
// own agent. Besides the device's attributes (see the package):
//
//   - path (string, required): the owned subtree, from the top:
//     "ietf-interfaces:interfaces/interface[name=eth1]" (nodes separated
//     by "/", the first named with its module, a list entry by
//     [key=value] predicates).
//   - config (object, required unless purged): the data, from the top,
//     holding the path's nodes down to the owned one and the owned
//     subtree under it, nothing beside them.
//   - operation (string, optional): "merge" (default: the owned subtree
//     is merged, leaves intend does not name are left alone and not
//     compared) or "replace" (the owned subtree is exactly config: a leaf
//     or list entry on the device that config does not name is a change,
//     and is removed).
//   - keys (object, optional): the key leaves of lists the adapter does
//     not know, by their path of node names without modules
//     ({"routing/route": ["prefix"]}); those of ietf-interfaces, ietf-ip
//     and ietf-system, and of the lists on path, are known.
//   - namespaces (object, optional): the XML namespace of each module
//     that is not an ietf- or iana- one ({"acme-router":
//     "urn:acme:router"}).
//   - confirm_timeout (integer, optional): seconds of the confirmed
//     commit where the device has :confirmed-commit (default 60); 0
//     commits unconfirmed.
//
// Applying edits the candidate datastore and commits where the device
// has :candidate (a confirmed commit, persisted where the device has
// :confirmed-commit:1.1 so that only its timeout ends it, then its
// confirmation), the running one otherwise, under locks, with
// discard-changes on failure; the
// resources of one device in flight together go in one transaction.
// A purge deletes the owned node (operation "delete"). Errors of the
// device (rpc-error) are permanent and name its error-path and message;
// a device that cannot be reached or goes away is unavailable; a lock
// held by another session is transient.
type Config struct {
	// MaxSessions bounds the sessions to one device (DefaultMaxSessions
	// when zero).
	MaxSessions int
	// Gather bounds the wait for edits to commit together
	// (DefaultGather when zero).
	Gather time.Duration
}

var (
	_ adapters.Handler   = Config{}
	_ adapters.Validator = Config{}
	_ adapters.Differ    = Config{}
	_ adapters.Sensitive = Config{}
)

// SensitiveAttributes names the device's credentials.
func (Config) SensitiveAttributes() []string { return []string{"password", "private_key"} }

// spec is a resource's attributes, checked.
type spec struct {
	address, user, password, privateKey, hostKey string
	path                                         string // as written (the id's)
	steps                                        []step // normalised
	owned                                        string // the owned node's normalised path
	config                                       map[string]any
	op                                           string
	confirm                                      int
	schema                                       *schema
}

// attributes are the attributes the adapter knows.
var attributes = []string{"address", "config", "confirm_timeout", "host_key", "keys", "namespaces",
	"operation", "password", "path", "private_key", "user"}

func parseSpec(r adapters.Resource) (*spec, error) {
	a := r.Attributes
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if !slices.Contains(attributes, k) {
			return nil, fmt.Errorf("%s: unknown attribute", k)
		}
	}
	s := &spec{op: "merge", confirm: DefaultConfirmTimeout}
	str := func(name string, required bool) (string, error) {
		v, ok := a[name]
		if !ok && !required {
			return "", nil
		}
		t, isStr := v.(string)
		if !isStr || t == "" || strings.ContainsFunc(t, func(r rune) bool { return r < 0x20 && r != '\n' }) {
			return "", fmt.Errorf("%s: want a non-empty string", name)
		}
		return t, nil
	}
	var err error
	if s.address, err = str("address", true); err != nil {
		return nil, err
	}
	if s.address, err = address(s.address); err != nil {
		return nil, fmt.Errorf("address: %w", err)
	}
	if s.user, err = str("user", true); err != nil {
		return nil, err
	}
	if s.password, err = str("password", false); err != nil {
		return nil, err
	}
	if s.privateKey, err = str("private_key", false); err != nil {
		return nil, err
	}
	if s.password == "" && s.privateKey == "" {
		return nil, errors.New("password: give password or private_key")
	}
	if s.privateKey != "" && !strings.Contains(s.privateKey, "PRIVATE KEY-----") {
		return nil, errors.New("private_key: want a PEM private key")
	}
	if s.hostKey, err = str("host_key", true); err != nil {
		return nil, err
	}
	if c, ok := a["confirm_timeout"]; ok {
		n, ok := integer(c)
		if !ok || n < 0 || n > 86400 {
			return nil, errors.New("confirm_timeout: want an integer of seconds from 0 to 86400")
		}
		s.confirm = int(n)
	}
	if o, ok := a["operation"]; ok {
		if o != "merge" && o != "replace" {
			return nil, errors.New(`operation: want "merge" or "replace"`)
		}
		s.op = o.(string)
	}
	namespaces := map[string]string{}
	if n, ok := a["namespaces"]; ok {
		m, ok := n.(map[string]any)
		if !ok {
			return nil, errors.New("namespaces: want an object of module names to namespace URIs")
		}
		for k, v := range m {
			u, ok := v.(string)
			if !validName(k) || !ok || u == "" || strings.ContainsAny(u, " \"<>&\n") {
				return nil, fmt.Errorf("namespaces: %s: want a module name and a namespace URI", k)
			}
			namespaces[k] = u
		}
	}
	keys := map[string][]string{}
	if n, ok := a["keys"]; ok {
		m, ok := n.(map[string]any)
		if !ok {
			return nil, errors.New("keys: want an object of list paths to key leaf names")
		}
		for k, v := range m {
			l, ok := v.([]any)
			if !ok || len(l) == 0 || slices.ContainsFunc(strings.Split(k, "/"), func(n string) bool { return !validName(n) }) {
				return nil, fmt.Errorf("keys: %s: want a path of node names without modules and a list of key names", k)
			}
			for _, e := range l {
				if n, ok := e.(string); !ok || !validName(n) {
					return nil, fmt.Errorf("keys: %s: want a list of key names", k)
				}
				keys[k] = append(keys[k], e.(string))
			}
		}
	}
	if s.path, err = str("path", true); err != nil {
		return nil, err
	}
	steps, err := parsePath(s.path)
	if err != nil {
		return nil, fmt.Errorf("path: %w", err)
	}
	if r.ID.Attribute != "path" || r.ID.Value != s.path {
		return nil, fmt.Errorf("path: the id's path is %q, the attribute's %q", r.ID.Value, s.path)
	}
	s.steps, _ = normSteps(steps)
	_, pathKeys := normSteps(steps)
	for sp, ks := range pathKeys {
		if known, ok := keys[sp]; ok && !slices.Equal(known, ks) {
			return nil, fmt.Errorf("path: the list %s has keys %v, the path names %v", sp, known, ks)
		}
		keys[sp] = ks
	}
	s.schema = newSchema(namespaces, keys)
	for _, st := range s.steps {
		if m, _ := splitName(st.name); m != "" && s.schema.namespace(m) == "" {
			return nil, fmt.Errorf("path: module %s has no namespace: give it in namespaces", m)
		}
	}
	s.owned = pathString(s.steps)
	c, ok := a["config"]
	if !ok {
		if r.Purged {
			return s, nil
		}
		return nil, errors.New("config: required unless purged")
	}
	if err := s.schema.checkData(c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	s.config = normalize(c.(map[string]any))
	if err := checkOwned(s.config, s.steps); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return s, nil
}

// address returns host:port, the port 830 when a gives none.
func address(a string) (string, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), "830"
	}
	n, perr := strconv.Atoi(port)
	name := host != "" && !strings.ContainsFunc(host, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	})
	if !name && (!strings.Contains(host, ":") || net.ParseIP(host) == nil) || perr != nil || n < 1 || n > 65535 ||
		strconv.Itoa(n) != port {
		return "", errors.New(`want a host name or address and an optional port ("r1.lab", "r1.lab:2830", "[2001:db8::1]:830")`)
	}
	return net.JoinHostPort(host, port), nil
}

// integer reads a whole number of JSON.
func integer(v any) (int64, bool) {
	switch t := v.(type) {
	case json.Number:
		n, err := t.Int64()
		return n, err == nil
	case float64:
		return int64(t), t == float64(int64(t))
	case int:
		return int64(t), true
	case int64:
		return t, true
	}
	return 0, false
}

// Validate checks the attributes, without reaching the device.
func (Config) Validate(_ context.Context, _ *adapters.Context, desired adapters.Resource) error {
	_, err := parseSpec(desired)
	if err != nil {
		return adapters.Permanent(err)
	}
	return nil
}

// Observe reads the owned subtree from the running datastore.
func (h Config) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	s, err := parseSpec(desired)
	if err != nil {
		return adapters.Observation{}, adapters.Permanent(err)
	}
	d, err := h.device(ctx, hc, s)
	if err != nil {
		return adapters.Observation{}, err
	}
	d.observing(+1)
	defer d.observing(-1)
	reply, err := d.sess.GetConfig(ctx, session.Running, s.schema.filter(s.steps))
	if err != nil {
		return adapters.Observation{}, d.classify(fmt.Errorf("get-config: %w", err))
	}
	hc.SetFact("capabilities", d.sess.Capabilities())
	els, err := parseXML(reply)
	if err != nil {
		return adapters.Observation{}, adapters.Permanent(fmt.Errorf("get-config: %w", err))
	}
	data := s.schema.parseData(els, s.config)
	_, exists := owned(data, s.steps)
	obs := adapters.Observation{Exists: exists, Attributes: map[string]any{"config": data}}
	if exists != !desired.Purged || !desired.Purged && len(h.Diff(desired, obs)) > 0 {
		d.expect(desired.ID.String())
	}
	return obs, nil
}

// Diff is the change of config per leaf ("config/<path>"), the
// device's attributes never.
func (Config) Diff(desired adapters.Resource, observed adapters.Observation) adapters.Diff {
	s, err := parseSpec(desired)
	if err != nil || s.config == nil {
		return adapters.ComputeDiff(desired.Attributes, observed.Attributes)
	}
	var got map[string]any
	if observed.Exists {
		got, _ = observed.Attributes["config"].(map[string]any)
	}
	out := adapters.Diff{}
	for p, c := range s.schema.diffData(s.config, got, s.owned, s.op == "replace") {
		out["config/"+p] = adapters.Change{From: c[0], To: c[1]}
	}
	return out
}

// Create writes the owned subtree.
func (h Config) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	return h.write(ctx, hc, desired)
}

// Update writes the owned subtree whole (merged or replaced).
func (h Config) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, _ adapters.Diff) error {
	return h.write(ctx, hc, desired)
}

func (h Config) write(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, err := parseSpec(desired)
	if err != nil {
		return adapters.Permanent(err)
	}
	d, err := h.device(ctx, hc, s)
	if err != nil {
		return err
	}
	return d.apply(ctx, hc, h, desired.ID.String(), s.schema.render(s.config, s.steps, s.op), s.confirm, false)
}

// Delete deletes the owned node; one already gone is no error.
func (h Config) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	s, err := parseSpec(desired)
	if err != nil {
		return adapters.Permanent(err)
	}
	d, err := h.device(ctx, hc, s)
	if err != nil {
		return err
	}
	return d.apply(ctx, hc, h, desired.ID.String(), s.schema.render(skeleton(s.steps), s.steps, "delete"), s.confirm, true)
}

// skeleton is the data of the path alone: its containers, and its list
// entries with their keys; the owned node is empty.
func skeleton(steps []step) map[string]any {
	top := map[string]any{}
	cur := top
	for _, st := range steps {
		next := map[string]any{}
		for _, k := range st.keys {
			next[k[0]] = k[1]
		}
		if len(st.keys) > 0 {
			cur[st.name] = []any{next}
		} else {
			cur[st.name] = next
		}
		cur = next
	}
	return top
}
