package cluster

import "github.com/twmb/franz-go/pkg/kerr"

// kerrCode is the error for a Kafka error code, nil for 0.
func kerrCode(code int16) error { return kerr.ErrorForCode(code) }
