package dashboards

import "strings"

// PromName translates an OpenTelemetry metric name and unit into the name
// the Prometheus exporter serves under translation_strategy
// UnderscoreEscapingWithSuffixes: dots become underscores, a unit of "s"
// appends "_seconds", and monotonic sums get "_total". Curly-brace units
// such as "{count}" are annotations and add nothing.
func PromName(name, unit string, counter bool) string {
	n := strings.ReplaceAll(name, ".", "_")
	if unit == "s" {
		n += "_seconds"
	}
	if counter {
		n += "_total"
	}
	return n
}

// PromLabel translates an attribute key into a Prometheus label name.
func PromLabel(key string) string { return strings.ReplaceAll(key, ".", "_") }
