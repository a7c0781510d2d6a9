package executor

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/intendhq/intend/internal/ledger"
)

// Remote is the ledger and registry of an executor on another host: the
// intend server's executor API (/api/v1/environments/{env}/executor/…),
// called with an executor token. The executor holds no database
// credentials; the server writes what it reports, and refuses anything
// beyond the token's agents.
//
// Errors wrap ledger.ErrUnavailable when the server cannot be reached or
// answers 502, 503, 504 or 429 (the executor keeps its batch and tries
// again), and ledger.ErrNotFound on a 404.
type Remote struct {
	base  *url.URL
	token string
	hc    *http.Client
	// maxPost bounds the body of one POST of records; a larger chunk is
	// sent in parts (the server takes at most api.MaxRecordBytes).
	maxPost int
}

// remoteMaxPost is the default bound on one POST of records: well under
// the server's 32 MiB.
const remoteMaxPost = 8 << 20

// NewRemote returns the API of the intend server at serverURL, called
// with token; tlsConfig (nil: the system's CAs) secures https.
func NewRemote(serverURL, token string, tlsConfig *tls.Config) (*Remote, error) {
	if token == "" {
		return nil, errors.New("an executor token is required: an admin makes one with " +
			"`intend token create --name NAME --role executor --environments ENV --agents A,B`")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	var u *url.URL
	if sock, ok := strings.CutPrefix(serverURL, "unix:"); ok {
		// The socket intend server opens for its own (embedded) executors:
		// plain HTTP on a file only the executor's user may connect to.
		if !filepath.IsAbs(sock) {
			return nil, fmt.Errorf("server URL %q: want unix:/absolute/path/to/socket", serverURL)
		}
		u = &url.URL{Scheme: "http", Host: "localhost"}
		tr.Proxy = nil
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
	} else {
		var err error
		u, err = url.Parse(strings.TrimRight(serverURL, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("server URL %q: want http(s)://host[:port]", serverURL)
		}
		if u.User != nil {
			return nil, fmt.Errorf("server URL %s: credentials belong in the token, not the URL", u.Redacted())
		}
		tr.TLSClientConfig = tlsConfig
	}
	return &Remote{base: u, token: token, hc: &http.Client{Transport: tr, Timeout: 5 * time.Minute},
		maxPost: remoteMaxPost}, nil
}

// Session reads the executor's session in env (an id or name).
func (r *Remote) Session(ctx context.Context, env string) (ledger.Session, error) {
	var s ledger.Session
	err := r.do(ctx, http.MethodGet, envPath(env, "session"), nil, &s)
	return s, err
}

// LoadBatch implements ledger.Ledger.
func (r *Remote) LoadBatch(ctx context.Context, envID string, run int64, seq int, resume string) (ledger.Batch, error) {
	var b ledger.Batch
	path := envPath(envID, "batches", strconv.FormatInt(run, 10), strconv.Itoa(seq))
	if resume != "" {
		path += "?resume_workflow=" + url.QueryEscape(resume)
	}
	err := r.do(ctx, http.MethodGet, path, nil, &b)
	return b, err
}

// RecordActions implements ledger.Ledger. A chunk whose records encode to
// more than the bound of one POST goes in parts, each recorded in a
// transaction of its own; the parts are the same for the same records,
// so a retry (again) skips the parts recorded before.
func (r *Remote) RecordActions(ctx context.Context, envID string, run int64, seq int, recs []ledger.ActionRecord, again bool) error {
	path := envPath(envID, "batches", strconv.FormatInt(run, 10), strconv.Itoa(seq), "actions")
	enc := make([][]byte, len(recs))
	for i := range recs {
		b, err := appendRecord(make([]byte, 0, 512), &recs[i])
		if err != nil {
			return fmt.Errorf("encode the record of %s: %w", recs[i].ResourceID, err)
		}
		enc[i] = b
	}
	for len(enc) > 0 {
		// {"records":[r1,r2,…],"again":false}, each record encoded once.
		body := append(make([]byte, 0, 1<<16), `{"records":[`...)
		n := 0
		for n < len(enc) && (n == 0 || len(body)+len(enc[n]) < r.maxPost) {
			if n > 0 {
				body = append(body, ',')
			}
			body = append(body, enc[n]...)
			n++
		}
		body = append(body, `],"again":`+strconv.FormatBool(again)+`}`...)
		if err := r.do(ctx, http.MethodPost, path, json.RawMessage(body), nil); err != nil {
			return err
		}
		enc = enc[n:]
	}
	return nil
}

// maxIntentsPost bounds the intents of one POST (the server takes at
// most api.MaxIntents); a wave holds at most the executor's concurrency
// of them, so one POST as a rule.
const maxIntentsPost = 1000

// RecordIntents implements ledger.Ledger.
func (r *Remote) RecordIntents(ctx context.Context, envID string, run int64, seq int, intents []ledger.Intent) error {
	path := envPath(envID, "batches", strconv.FormatInt(run, 10), strconv.Itoa(seq), "intents")
	for len(intents) > 0 {
		n := min(len(intents), maxIntentsPost)
		err := r.do(ctx, http.MethodPost, path, struct {
			Intents []ledger.Intent `json:"intents"`
		}{intents[:n]}, nil)
		if errors.Is(err, ledger.ErrNotFound) {
			// A server of before intents (a rolling upgrade updates the
			// executors first, or the servers): the changes go on
			// without them, as they did with that server; the batch
			// itself, were it gone, fails its load or its records.
			return nil
		}
		if err != nil {
			return err
		}
		intents = intents[n:]
	}
	return nil
}

// ReportExecutor implements ledger.Registry.
func (r *Remote) ReportExecutor(ctx context.Context, env string, rep ledger.ExecutorReport) error {
	body := struct {
		Hostname string   `json:"hostname"`
		PID      int      `json:"pid"`
		Version  string   `json:"version"`
		Agents   []string `json:"agents"`
		First    bool     `json:"first"`
		Pool     string   `json:"pool,omitempty"`
	}{rep.Hostname, rep.PID, rep.Version, rep.Agents, rep.First, rep.Pool}
	if body.Agents == nil {
		body.Agents = []string{}
	}
	return r.do(ctx, http.MethodPut, envPath(env, "registrations", rep.Name), body, nil)
}

// StopExecutor implements ledger.Registry.
func (r *Remote) StopExecutor(ctx context.Context, name string, envs []string) error {
	var errs []error
	for _, env := range envs {
		errs = append(errs, r.do(ctx, http.MethodPost, envPath(env, "registrations", name, "stop"), nil, nil))
	}
	return errors.Join(errs...)
}

// OpenRunVersions implements ledger.Registry, one session read per
// environment.
func (r *Remote) OpenRunVersions(ctx context.Context, envIDs []string) (map[string]map[int64]bool, error) {
	out := map[string]map[int64]bool{}
	for _, id := range envIDs {
		s, err := r.Session(ctx, id)
		if err != nil {
			return nil, err
		}
		open := map[int64]bool{}
		for _, v := range s.OpenVersions {
			open[v] = true
		}
		out[id] = open
	}
	return out, nil
}

// envPath is the path of an executor route of env.
func envPath(env string, parts ...string) string {
	p := "/api/v1/environments/" + url.PathEscape(env) + "/executor"
	for _, x := range parts {
		p += "/" + url.PathEscape(x)
	}
	return p
}

// problem is the part of an RFC 9457 problem an executor shows.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Errors []struct {
		Field  string `json:"field"`
		Detail string `json:"detail"`
	} `json:"errors"`
}

// do calls the API and decodes a JSON answer into out (nil: none).
func (r *Remote) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := r.send(ctx, r.hc, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %s %s: reading the answer: %w", ledger.ErrUnavailable, method, path, err)
	}
	return nil
}

// artifactTimeout bounds the download of one artifact (256 MiB at most
// by default: 30 minutes is 150 kB/s).
const artifactTimeout = 30 * time.Minute

// Artifact implements ledger.Ledger: it streams the artifact digest of
// env from the executor API (GET .../executor/artifacts/{digest}); the
// caller reads it, closes it and verifies its digest.
func (r *Remote) Artifact(ctx context.Context, env, digest string) (io.ReadCloser, error) {
	hc := &http.Client{Transport: r.hc.Transport, Timeout: artifactTimeout}
	resp, err := r.send(ctx, hc, http.MethodGet, envPath(env, "artifacts", digest), nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// send makes a request to the server: a 2xx answer is returned, its body
// the caller's to close; any other is an error, wrapping
// ledger.ErrUnavailable or ledger.ErrNotFound as Remote's errors do.
func (r *Remote) send(ctx context.Context, hc *http.Client, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	switch v := in.(type) {
	case nil:
	case json.RawMessage:
		body = bytes.NewReader(v)
	default:
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base.String()+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Refused, reset, timed out: the server may be back soon.
		return nil, fmt.Errorf("%w: %s %s: %w", ledger.ErrUnavailable, method, path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var p problem
	detail := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &p) == nil && (p.Detail != "" || p.Title != "") {
		detail = p.Detail
		if detail == "" {
			detail = p.Title
		}
		for i, fe := range p.Errors {
			if i == 5 {
				detail += "; …"
				break
			}
			detail += "; " + fe.Field + ": " + fe.Detail
		}
	}
	err = fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, detail)
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, fmt.Errorf("%w: %w", ledger.ErrNotFound, err)
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return nil, fmt.Errorf("%w: %w", ledger.ErrUnavailable, err)
	}
	return nil, err
}
