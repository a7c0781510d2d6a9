// Package temporalconn connects intend's server and executors to Temporal:
// address and namespace, TLS (a private CA, the expected server name),
// mutual TLS (a client certificate) and an API key. The flags and
// environment variables of these settings are described here once, for
// `intend server`, `intend executor` and custom executor binaries.
package temporalconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
)

// Security says how to secure the connection. The zero value is plaintext
// without credentials (a local dev server).
type Security struct {
	// TLS turns TLS on, trusting the system's roots. Setting any other
	// field turns it on as well.
	TLS bool
	// CAFile is a PEM bundle of the CAs to trust instead of the system's.
	CAFile string
	// CertFile and KeyFile are the client certificate and its key (PEM)
	// for mutual TLS; both or neither.
	CertFile string
	KeyFile  string
	// ServerName is the name the server's certificate must hold; empty
	// means the host of the address.
	ServerName string
	// APIKey is sent with every call as "authorization: Bearer <key>"
	// (Temporal Cloud API keys). It implies TLS.
	APIKey string
}

// Enabled reports whether the connection uses TLS.
func (s Security) Enabled() bool {
	return s.TLS || s.CAFile != "" || s.CertFile != "" || s.KeyFile != "" || s.ServerName != "" || s.APIKey != ""
}

// Mode describes the connection for logs and errors, without secrets:
// "plaintext", "TLS without a client certificate" or "mutual TLS", with
// ", API key" when one is sent. A server that wants a client certificate
// may just drop the connection, so errors say whether one was sent.
func (s Security) Mode() string {
	m := "plaintext"
	switch {
	case s.CertFile != "":
		m = "mutual TLS"
	case s.Enabled():
		m = "TLS without a client certificate"
	}
	if s.APIKey != "" {
		m += ", API key"
	}
	return m
}

// LogValue keeps the API key out of logs.
func (s Security) LogValue() slog.Value {
	return slog.GroupValue(slog.String("mode", s.Mode()), slog.String("ca", s.CAFile),
		slog.String("cert", s.CertFile), slog.String("server_name", s.ServerName))
}

// TLSConfig returns the client TLS configuration, nil for plaintext. It
// reads the CA bundle and the client key pair now, so a bad file is
// reported at start with its name.
func (s Security) TLSConfig() (*tls.Config, error) {
	if !s.Enabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("temporal TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal TLS CA: %s holds no PEM certificate", s.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case s.CertFile != "" && s.KeyFile != "":
		pair, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("temporal TLS client certificate %s with key %s: %w", s.CertFile, s.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case s.CertFile != "" || s.KeyFile != "":
		return nil, errors.New("temporal TLS: a client certificate needs both --temporal-tls-cert and --temporal-tls-key")
	}
	return cfg, nil
}

// Options are everything Dial needs.
type Options struct {
	Address   string
	Namespace string
	Security  Security
	Log       *slog.Logger
	// Metrics, when set, receives the SDK's metrics.
	Metrics client.MetricsHandler
	// Interceptors intercept the client's calls and, those that are
	// worker interceptors too (tracing), its workers'.
	Interceptors []interceptor.ClientInterceptor
}

// ClientOptions returns the SDK's options for o.
func (o Options) ClientOptions() (client.Options, error) {
	tlsCfg, err := o.Security.TLSConfig()
	if err != nil {
		return client.Options{}, err
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	opts := client.Options{
		HostPort:          o.Address,
		Namespace:         o.Namespace,
		Logger:            tlog.NewStructuredLogger(log.With("component", "temporal")),
		MetricsHandler:    o.Metrics,
		Interceptors:      o.Interceptors,
		ConnectionOptions: client.ConnectionOptions{TLS: tlsCfg},
	}
	if o.Security.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(o.Security.APIKey)
	}
	return opts, nil
}

// Dial connects and checks the connection (the SDK asks the server for
// its capabilities). Errors name the address, the namespace and the
// connection mode, so "certificate required" is easy to place.
func Dial(ctx context.Context, o Options) (client.Client, error) {
	opts, err := o.ClientOptions()
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to temporal at %s (namespace %s, %s): %w",
			o.Address, o.Namespace, o.Security.Mode(), err)
	}
	return c, nil
}

// Setting describes one security setting as a command-line flag and an
// environment variable.
type Setting struct {
	Flag  string
	Env   string
	Usage string
	// Field returns the setting's field in s: a *string or a *bool.
	Field func(s *Security) any
}

// Settings are the security settings, in the order --help lists them.
func Settings() []Setting {
	return []Setting{
		{"temporal-tls", "INTEND_TEMPORAL_TLS", "connect to Temporal with TLS, trusting the system's CAs " +
			"(implied by the other --temporal-tls-* flags and by an API key)",
			func(s *Security) any { return &s.TLS }},
		{"temporal-tls-ca", "INTEND_TEMPORAL_TLS_CA", "PEM file of the CAs that sign Temporal's server certificate",
			func(s *Security) any { return &s.CAFile }},
		{"temporal-tls-cert", "INTEND_TEMPORAL_TLS_CERT", "PEM client certificate for mutual TLS with Temporal",
			func(s *Security) any { return &s.CertFile }},
		{"temporal-tls-key", "INTEND_TEMPORAL_TLS_KEY", "PEM key of --temporal-tls-cert",
			func(s *Security) any { return &s.KeyFile }},
		{"temporal-tls-server-name", "INTEND_TEMPORAL_TLS_SERVER_NAME",
			"name Temporal's server certificate must hold (default: the host of --temporal-address)",
			func(s *Security) any { return &s.ServerName }},
		{"temporal-api-key", "INTEND_TEMPORAL_API_KEY", "Temporal API key, sent as a bearer token " +
			"(prefer the environment variable: flags show in ps)",
			func(s *Security) any { return &s.APIKey }},
	}
}
