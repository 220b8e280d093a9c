package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// The table make loadtest prints at the end of a run.

// report prints one row per pipeline, each against the first.
func report(w io.Writer, ts []*tally) {
	ref := ts[0]
	refRate := float64(ref.sent.Chunks) / ref.elapsed.Seconds()
	refCPU := cpuPerMillion(ref)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "pipeline\tspans/s\tchunks/s\tthroughput ×\tper round: median (min–max)\tCPU-s/M chunks\tCPU ×\tns/chunk\tΔns/chunk\tRSS MiB\tpeak MiB\trefused\tidle %%\t\n")
	for _, t := range ts {
		rate := float64(t.sent.Chunks) / t.elapsed.Seconds()
		cpu := cpuPerMillion(t)
		u, _ := t.col.Usage()
		med, lo, hi := roundRatios(t.rates, ref.rates)
		fmt.Fprintf(tw, "%s\t%.0f\t%.2fM\t%.2f\t%.2f (%.2f–%.2f)\t%.4f\t%.2f\t%.1f\t%+.1f\t%.0f\t%.0f\t%d\t%.1f\t\n",
			t.name, float64(t.sent.Spans)/t.elapsed.Seconds(), rate/1e6, rate/refRate, med, lo, hi,
			cpu, cpu/refCPU, cpu*1e3, (cpu-refCPU)*1e3,
			float64(t.rss)/(1<<20), float64(u.PeakRSS)/(1<<20), t.refused, 100*t.machine.idleShare())
	}
	tw.Flush()
	fmt.Fprintln(w, "\nthroughput × and CPU × are against the first pipeline, over all rounds; per round: the throughput ratio of each round's")
	fmt.Fprintln(w, "slice to the first pipeline's slice of the same round — its spread is the noise of the machine. ns/chunk is")
	fmt.Fprintln(w, "collector CPU time per content chunk (CPU-s/M chunks × 1000). idle % is the whole machine's idle CPU time during")
	fmt.Fprintln(w, "the pipeline's slices: a throughput ratio measures the collector's CPU only where it is near 0 (raise -senders).")
}

// roundRatios returns the median, least and greatest of rates[i]/ref[i].
func roundRatios(rates, ref []float64) (med, lo, hi float64) {
	var rs []float64
	for i := range min(len(rates), len(ref)) {
		if ref[i] > 0 {
			rs = append(rs, rates[i]/ref[i])
		}
	}
	if len(rs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(rs)
	m := len(rs) / 2
	med = rs[m]
	if len(rs)%2 == 0 {
		med = (rs[m-1] + rs[m]) / 2
	}
	return med, rs[0], rs[len(rs)-1]
}

func cpuPerMillion(t *tally) float64 {
	if t.sent.Chunks == 0 {
		return 0
	}
	return t.cpu.Seconds() / float64(t.sent.Chunks) * 1e6
}
