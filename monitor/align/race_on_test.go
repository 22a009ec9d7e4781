//go:build race

package align

// raceEnabled: the race detector slows the reference comparison about
// tenfold; its random cases are fewer there (the plain run has them all).
const raceEnabled = true
