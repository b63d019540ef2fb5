package main

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/hcloudscale/hcloudscale/config"
)

// envMemoryLimit is the container's memory limit in bytes; the chart sets
// it from the pod's resourceFieldRef limits.memory.
const envMemoryLimit = "HCLOUDSCALE_MEMORY_LIMIT"

// memoryLimitShare is the part of the container's limit given to the Go
// runtime as its soft limit: the rest is for what the runtime does not
// manage and for the time the collector needs to catch up.
const memoryLimitShare = 0.9

// memoryLimit returns the soft memory limit serve gives the Go runtime
// from $HCLOUDSCALE_MEMORY_LIMIT (90% of it), so that the collector works
// harder before the container is killed rather than after; 0 when the
// variable is unset or GOMEMLIMIT is set (the runtime's own setting wins).
func memoryLimit(env config.Env) (int64, error) {
	v := strings.TrimSpace(env.Get(envMemoryLimit))
	if v == "" || env.Get("GOMEMLIMIT") != "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want the container's memory limit in bytes, such as 268435456", envMemoryLimit, v)
	}
	return int64(float64(n) * memoryLimitShare), nil
}

// setMemoryLimit applies memoryLimit and returns what it set (0: none).
func setMemoryLimit(env config.Env) (int64, error) {
	n, err := memoryLimit(env)
	if err != nil || n == 0 {
		return 0, err
	}
	debug.SetMemoryLimit(n)
	return n, nil
}
