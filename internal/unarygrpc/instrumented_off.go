//go:build !race && !msan && !asan

package unarygrpc

// instrumented is true in builds whose checker (the race detector, the
// memory or address sanitizer) learns about reads and writes of memory
// through the standard library's system calls.
const instrumented = false
