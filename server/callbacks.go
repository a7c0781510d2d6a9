package server

import "github.com/intendhq/intend/internal/callbackd"

// CallbackOptions tune the delivery of LSM callbacks (Config.Callbacks):
// the dispatcher is internal/callbackd's.
type CallbackOptions = callbackd.Options
