package adapter

import (
	"context"
	"errors"
	"fmt"

	caerrors "sigs.k8s.io/cluster-autoscaler/pkg/utils/errors"

	"github.com/hcloudscale/hcloudscale/pool"
)

// autoscalerError wraps err, prefixed with what was being done, as the
// autoscaler's error type that fits it:
//
//   - [pool.ErrOfferingUnavailable] and a call that ran out of its
//     timeout: TransientError. Both pass; the autoscaler backs the group
//     off and moves on, and a loop that ends with a transient error
//     still counts as healthy for its liveness check.
//   - [pool.ErrClosed] and a cancelled call: InternalError; the provider
//     is shutting down.
//   - anything else (bounds, nodes of another group, API failures):
//     CloudProviderError.
//
// errors.Is and errors.As see through the result. nil stays nil.
func autoscalerError(err error, format string, args ...any) caerrors.AutoscalerError {
	if err == nil {
		return nil
	}
	t := caerrors.CloudProviderError
	switch {
	case errors.Is(err, pool.ErrOfferingUnavailable), errors.Is(err, context.DeadlineExceeded):
		t = caerrors.TransientError
	case errors.Is(err, pool.ErrClosed), errors.Is(err, context.Canceled):
		t = caerrors.InternalError
	}
	return caerrors.ToAutoscalerError(t, fmt.Errorf(format+": %w", append(args, err)...))
}
