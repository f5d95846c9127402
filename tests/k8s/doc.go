// Package k8s holds the Kubernetes deployment's tests, in a Go module of their own so that
// Helm's and Kubernetes' dependencies stay out of Shale's: the chart is linted and
// rendered with Helm's Go packages, every manifest is decoded strictly into k8s.io/api
// types and applied server-side to a real kube-apiserver, the container image is built
// and inspected, and the chart's rendered configuration runs as real `shale` processes
// through a rolling restart. `make test` runs them after the main module's tests.
package k8s
