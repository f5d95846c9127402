package metadata

// Endpoint is one listener a broker serves Kafka clients on, as advertised.
type Endpoint struct {
	Name             string // listener name, e.g. SASL_SSL or EXTERNAL
	Host             string
	Port             int32
	SecurityProtocol string
}

// On returns the broker as seen by a client that arrived on the named listener: Host and
// Port are that listener's advertised address. As in Kafka, a broker without the
// listener is not reachable from it (false). An empty name, or a broker registered
// without its listener list, keeps the main (inter-broker) address.
func (b Broker) On(listener string) (Broker, bool) {
	if listener == "" || len(b.Listeners) == 0 {
		return b, true
	}
	for _, e := range b.Listeners {
		if e.Name == listener {
			b.Host, b.Port = e.Host, e.Port
			return b, true
		}
	}
	return b, false
}
