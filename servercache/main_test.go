package servercache

import (
	"testing"

	"go.uber.org/goleak"
)

// Every listing goroutine must have ended when the tests do: Close waits
// for them, and the fake API closes its connections.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
