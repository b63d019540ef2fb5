package hcloudscale

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/internal/redact"
)

// newDebugTransport logs API traffic at debug level with the token, user
// data and passwords redacted; it costs nothing when debug is off.
// hcloud-go's own WithDebugWriter is never used: it dumps bodies whole.
func newDebugTransport(next http.RoundTripper, logger *zap.Logger) http.RoundTripper {
	return redact.NewDebugTransport(next, logger)
}
