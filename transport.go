package hcloudscale

import (
	"net/http"

	"go.uber.org/zap"
)

func newDebugTransport(next http.RoundTripper, _ *zap.Logger) http.RoundTripper { return next }
