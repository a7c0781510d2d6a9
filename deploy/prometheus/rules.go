// Package prometheus carries deploy/prometheus's recording and alert rules
// into the binary, for `intend dev-cluster`'s Prometheus.
package prometheus

import _ "embed"

// Rules is rules.yml.
//
//go:embed rules.yml
var Rules []byte
