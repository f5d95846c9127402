package metadata

import (
	"context"
	"fmt"
	"maps"
)

// Kafka's client quota keys (KIP-546).
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
)

// QuotaKeys are the quota keys Shale stores; it enforces all but controller_mutation_rate.
var QuotaKeys = []string{QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage, QuotaControllerMutationRate}

// QuotaEntityPart is one component of a quota entity: absent (Set false), the default
// for every name, or one name.
type QuotaEntityPart struct {
	Set     bool
	Default bool
	Name    string
}

// QuotaEntity is Kafka's client quota entity: a user, a client id, or both.
type QuotaEntity struct {
	User, ClientID QuotaEntityPart
}

func (p QuotaEntityPart) String() string {
	switch {
	case !p.Set:
		return ""
	case p.Default:
		return "<default>"
	default:
		return p.Name
	}
}

func (e QuotaEntity) String() string {
	switch {
	case e.User.Set && e.ClientID.Set:
		return fmt.Sprintf("user=%s,client-id=%s", e.User, e.ClientID)
	case e.User.Set:
		return "user=" + e.User.String()
	default:
		return "client-id=" + e.ClientID.String()
	}
}

// ClientQuotas maps each entity to its values (key -> value). Immutable once in an image.
type ClientQuotas map[QuotaEntity]map[string]float64

// With returns a copy with entity's values replaced (nil or empty: removed).
func (q ClientQuotas) With(e QuotaEntity, values map[string]float64) ClientQuotas {
	out := maps.Clone(q)
	if out == nil {
		out = ClientQuotas{}
	}
	if len(values) == 0 {
		delete(out, e)
	} else {
		out[e] = values
	}
	return out
}

// QuotaOp changes one key of an entity: sets it to Value, or removes it.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// QuotaAlteration is one entity's changes in an AlterClientQuotas request.
type QuotaAlteration struct {
	Entity QuotaEntity
	Ops    []QuotaOp
}

// QuotaStore is the part of a Store that changes client quotas through the controller.
type QuotaStore interface {
	// AlterClientQuotas applies each alteration; the result has one error per entry
	// (nil on success), and the error is for the call as a whole.
	AlterClientQuotas(ctx context.Context, alts []QuotaAlteration, validateOnly bool) ([]error, error)
}
