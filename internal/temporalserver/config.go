package temporalserver

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The server's static configuration, in the YAML shape its config loader
// reads (go.temporal.io/server/common/config). Only what intend sets is
// declared: the server fills in defaults for the rest. These types are our
// own so that the main module does not depend on the server.
type staticConfig struct {
	Log                 logConfig          `yaml:"log"`
	Persistence         persistenceConfig  `yaml:"persistence"`
	Global              globalConfig       `yaml:"global"`
	Services            map[string]service `yaml:"services"`
	ClusterMetadata     clusterMetadata    `yaml:"clusterMetadata"`
	DCRedirectionPolicy struct {
		Policy string `yaml:"policy"`
	} `yaml:"dcRedirectionPolicy"`
	Archival          archival          `yaml:"archival"`
	NamespaceDefaults namespaceDefaults `yaml:"namespaceDefaults"`
	PublicClient      struct {
		HostPort string `yaml:"hostPort"`
	} `yaml:"publicClient"`
	DynamicConfigClient struct {
		Filepath     string `yaml:"filepath"`
		PollInterval string `yaml:"pollInterval"`
	} `yaml:"dynamicConfigClient"`
}

type logConfig struct {
	Stdout bool   `yaml:"stdout"`
	Level  string `yaml:"level"`
}

type persistenceConfig struct {
	DefaultStore     string               `yaml:"defaultStore"`
	VisibilityStore  string               `yaml:"visibilityStore"`
	NumHistoryShards int32                `yaml:"numHistoryShards"`
	DataStores       map[string]dataStore `yaml:"datastores"`
}

type dataStore struct {
	SQL sqlStore `yaml:"sql"`
}

type sqlStore struct {
	PluginName      string `yaml:"pluginName"`
	DatabaseName    string `yaml:"databaseName"`
	ConnectAddr     string `yaml:"connectAddr"`
	ConnectProtocol string `yaml:"connectProtocol"`
	User            string `yaml:"user"`
	Password        string `yaml:"password"`
	MaxConns        int    `yaml:"maxConns"`
	MaxIdleConns    int    `yaml:"maxIdleConns"`
	MaxConnLifetime string `yaml:"maxConnLifetime"`
}

type globalConfig struct {
	Membership struct {
		MaxJoinDuration  string `yaml:"maxJoinDuration"`
		BroadcastAddress string `yaml:"broadcastAddress"`
	} `yaml:"membership"`
	Metrics *metricsConfig `yaml:"metrics,omitempty"`
}

// metricsConfig serves the server's own metrics for Prometheus to scrape
// (GET /metrics on listenAddress).
type metricsConfig struct {
	Prometheus struct {
		Framework     string `yaml:"framework"`
		TimerType     string `yaml:"timerType"`
		ListenAddress string `yaml:"listenAddress"`
	} `yaml:"prometheus"`
}

type service struct {
	RPC rpc `yaml:"rpc"`
}

type rpc struct {
	GRPCPort       int    `yaml:"grpcPort"`
	MembershipPort int    `yaml:"membershipPort"`
	BindOnIP       string `yaml:"bindOnIP"`
	HTTPPort       int    `yaml:"httpPort,omitempty"`
}

type clusterMetadata struct {
	EnableGlobalNamespace    bool                          `yaml:"enableGlobalNamespace"`
	FailoverVersionIncrement int                           `yaml:"failoverVersionIncrement"`
	MasterClusterName        string                        `yaml:"masterClusterName"`
	CurrentClusterName       string                        `yaml:"currentClusterName"`
	ClusterInformation       map[string]clusterInformation `yaml:"clusterInformation"`
}

type clusterInformation struct {
	Enabled                bool   `yaml:"enabled"`
	InitialFailoverVersion int    `yaml:"initialFailoverVersion"`
	RPCName                string `yaml:"rpcName"`
	RPCAddress             string `yaml:"rpcAddress"`
	HTTPAddress            string `yaml:"httpAddress"`
}

type archival struct {
	History    archivalState `yaml:"history"`
	Visibility archivalState `yaml:"visibility"`
}

type archivalState struct {
	State string `yaml:"state"`
}

type namespaceDefaults struct {
	Archival archival `yaml:"archival"`
}

// clusterName names the one cluster; it is stored in the database at the
// first start and must not change afterwards.
const clusterName = "active"

// Pool sizes per process. The default store serves all four services; the
// visibility store only the history service's visibility queue and the
// frontend's list calls.
const (
	defaultStoreConns    = 20
	visibilityStoreConns = 4
)

// staticConfigYAML renders the server's static configuration: persistence
// on PostgreSQL through the pgx plugin, the four services in one process on
// ip, and the dynamic config file at dynamicConfigFile.
func staticConfigYAML(pg Postgres, ip string, ports Ports, shards int, logLevel, dynamicConfigFile string) ([]byte, error) {
	pgAddr := net.JoinHostPort(pg.Host, strconv.Itoa(pg.Port))
	store := func(db string, conns int) dataStore {
		return dataStore{SQL: sqlStore{
			PluginName:      sqlPlugin,
			DatabaseName:    db,
			ConnectAddr:     pgAddr,
			ConnectProtocol: "tcp",
			User:            pg.User,
			Password:        pg.Password,
			MaxConns:        conns,
			MaxIdleConns:    conns,
			MaxConnLifetime: "1h",
		}}
	}
	frontend := net.JoinHostPort(ip, strconv.Itoa(ports.Frontend))
	var c staticConfig
	c.Log = logConfig{Stdout: true, Level: serverLogLevel(logLevel)}
	c.Persistence = persistenceConfig{
		DefaultStore:     "default",
		VisibilityStore:  "visibility",
		NumHistoryShards: int32(shards),
		DataStores: map[string]dataStore{
			"default":    store(pg.database(), defaultStoreConns),
			"visibility": store(pg.visibilityDatabase(), visibilityStoreConns),
		},
	}
	c.Global.Membership.MaxJoinDuration = "30s"
	c.Global.Membership.BroadcastAddress = ip
	if ports.Metrics != 0 {
		m := &metricsConfig{}
		m.Prometheus.Framework, m.Prometheus.TimerType = "tally", "histogram"
		m.Prometheus.ListenAddress = net.JoinHostPort(ip, strconv.Itoa(ports.Metrics))
		c.Global.Metrics = m
	}
	c.Services = map[string]service{
		"frontend": {RPC: rpc{GRPCPort: ports.Frontend, MembershipPort: ports.FrontendMembership, HTTPPort: ports.FrontendHTTP, BindOnIP: ip}},
		"history":  {RPC: rpc{GRPCPort: ports.History, MembershipPort: ports.HistoryMembership, BindOnIP: ip}},
		"matching": {RPC: rpc{GRPCPort: ports.Matching, MembershipPort: ports.MatchingMembership, BindOnIP: ip}},
		"worker":   {RPC: rpc{GRPCPort: ports.Worker, MembershipPort: ports.WorkerMembership, BindOnIP: ip}},
	}
	c.ClusterMetadata = clusterMetadata{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]clusterInformation{clusterName: {
			Enabled:                true,
			InitialFailoverVersion: 1,
			RPCName:                "frontend",
			RPCAddress:             frontend,
			HTTPAddress:            net.JoinHostPort(ip, strconv.Itoa(ports.FrontendHTTP)),
		}},
	}
	c.DCRedirectionPolicy.Policy = "noop"
	disabled := archival{History: archivalState{"disabled"}, Visibility: archivalState{"disabled"}}
	c.Archival = disabled
	c.NamespaceDefaults.Archival = disabled
	c.PublicClient.HostPort = frontend
	c.DynamicConfigClient.Filepath = dynamicConfigFile
	// The server's minimum; the file is written before each start and
	// not changed while the server runs.
	c.DynamicConfigClient.PollInterval = "5m"

	b, err := yaml.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("render static config: %w", err)
	}
	return append([]byte("# Generated by intend (internal/temporalserver) at every start; edits are lost.\n"), b...), nil
}

// serverLogLevel maps temporal.yaml's log_level (the CLI's levels) to the
// server's zap levels.
func serverLogLevel(level string) string {
	switch strings.ToLower(level) {
	case "":
		return "info"
	case "never":
		return "fatal"
	default:
		return strings.ToLower(level)
	}
}

// fixedDynamicConfig is set on every server this package starts, under
// temporal.yaml's dynamic_config (which wins on a clash).
var fixedDynamicConfig = map[string]any{
	// The same as devtemporal: the server does not phone home.
	"frontend.enableServerVersionCheck": false,
}

// dynamicConfigYAML renders dynamic config in the server's file format
// (each key holds a list of constrained values; intend sets one value
// without constraints) from temporal.yaml's flat dynamic_config, so that
// the dev server and this server are tuned from the same place.
func dynamicConfigYAML(values map[string]any) ([]byte, error) {
	type constrainedValue struct {
		Value any `yaml:"value"`
	}
	merged := maps.Clone(fixedDynamicConfig)
	maps.Copy(merged, values)
	var doc yaml.Node
	doc.Kind = yaml.MappingNode
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		var v yaml.Node
		if err := v.Encode([]constrainedValue{{Value: merged[k]}}); err != nil {
			return nil, fmt.Errorf("render dynamic config %s: %w", k, err)
		}
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &v)
	}
	b, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("render dynamic config: %w", err)
	}
	return append([]byte("# Generated by intend from temporal.yaml's dynamic_config at every start; edits are lost.\n"), b...), nil
}
