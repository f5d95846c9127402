//go:build race

package sim

// raceEnabled: under the race detector a seed runs several times slower, so the -race
// pass of `make test` runs a few seeds and a separate pass without it runs hundreds.
const raceEnabled = true
