// Package testbed is the home of streamwatch's test and demo machinery:
// fakellm's engine, the hedge simulation, the local collector + Prometheus
// stack, the demo workload and the load generator. Nothing under it ships
// in the collector or in hedgeprobe; TestCollectorDoesNotImportSDKs
// keeps it out of the collector.
package testbed
