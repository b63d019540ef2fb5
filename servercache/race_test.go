//go:build race

package servercache

// raceEnabled reports whether the race detector is on; tests that only
// count requests at scale skip themselves then, because it makes them
// several times slower without checking anything more.
const raceEnabled = true
