// Package telemetry is the broker's side of KIP-714 client telemetry: it tracks the
// client instances that ask for their subscription (GetTelemetrySubscriptions) and push
// metrics (PushTelemetry), applies Kafka's rules on push intervals, payload size and
// compression, decodes the pushed OTLP metrics and exports them as Prometheus series with
// a client_instance_id label, under a cap on the number of series.
//
// Subscriptions are the CLIENT_METRICS config resources of the metadata image; the
// caller passes the image's current set to every call, so a change applies to the next
// request of each client (a push under the old subscription id gets
// UNKNOWN_SUBSCRIPTION_ID and the client asks again).
package telemetry
