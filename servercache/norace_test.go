//go:build !race

package servercache

const raceEnabled = false
