package semconv

import "strings"

// PromName translates an OpenTelemetry metric name and unit into the name
// contrib's Prometheus exporter serves under its default
// translation_strategy, UnderscoreEscapingWithSuffixes: dots become
// underscores, a unit of "s" appends "_seconds", and monotonic sums
// (counter) get "_total". Curly-brace units such as "{count}" are
// annotations and add nothing. It covers the units named here, which are
// all the connector uses.
func PromName(name, unit string, counter bool) string {
	n := strings.ReplaceAll(name, ".", "_")
	if unit == UnitSeconds {
		n += "_seconds"
	}
	if counter {
		n += "_total"
	}
	return n
}

// PromLabel translates an attribute key into the Prometheus label name the
// same exporter uses.
func PromLabel(key string) string { return strings.ReplaceAll(key, ".", "_") }
