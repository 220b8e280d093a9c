package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuTimes are the machine's CPU time counters from the first line of
// /proc/stat, in clock ticks: all of them, and the idle ones (idle and
// iowait).
type cpuTimes struct{ total, idle uint64 }

// machineCPU reads the machine's CPU time counters. A closed loop measures
// the collector's capacity only while the machine has no idle time: with
// too few senders for a pipeline that answers late (one without a batch
// processor answers after the connector has run), every sender can be
// waiting on the network at once, and the throughput then measures the
// loop's latency, not the collector's CPU (docs/scale.md).
func machineCPU() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPULine(line)
}

// parseCPULine parses the aggregate "cpu" line of /proc/stat: user nice
// system idle iowait irq softirq steal (guest time is already in user).
func parseCPULine(line string) (cpuTimes, error) {
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: not the cpu line: %q", line)
	}
	var t cpuTimes
	for i, f := range fields[1:min(len(fields), 9)] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: field %d: %w", i+1, err)
		}
		t.total += v
		if i == 3 || i == 4 {
			t.idle += v
		}
	}
	if t.total == 0 {
		return cpuTimes{}, errors.New("/proc/stat: no CPU time")
	}
	return t, nil
}

// sub is the time between two readings.
func (t cpuTimes) sub(u cpuTimes) cpuTimes {
	return cpuTimes{total: t.total - u.total, idle: t.idle - u.idle}
}

// add accumulates a reading's delta.
func (t cpuTimes) add(u cpuTimes) cpuTimes {
	return cpuTimes{total: t.total + u.total, idle: t.idle + u.idle}
}

// idleShare is the idle fraction of the machine's CPU time.
func (t cpuTimes) idleShare() float64 {
	if t.total == 0 {
		return 0
	}
	return float64(t.idle) / float64(t.total)
}
