//go:build !race

package hedgesim

const raceEnabled = false
