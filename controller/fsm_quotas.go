package controller

import (
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// Client quotas (KIP-546) live in the image: AlterClientQuotas proposes each entity's
// complete values, the FSM records them in the change, and brokers receive them in
// deltas and image chunks like any other metadata.

func quotaPartToPB(p metadata.QuotaEntityPart) *pb.QuotaEntityPart {
	if !p.Set {
		return nil
	}
	return &pb.QuotaEntityPart{Default: p.Default, Name: p.Name}
}

func quotaPartFromPB(p *pb.QuotaEntityPart) metadata.QuotaEntityPart {
	if p == nil {
		return metadata.QuotaEntityPart{}
	}
	if p.Default {
		return metadata.QuotaEntityPart{Set: true, Default: true}
	}
	return metadata.QuotaEntityPart{Set: true, Name: p.Name}
}

func quotaEntityToPB(e metadata.QuotaEntity) *pb.ClientQuotaEntity {
	return &pb.ClientQuotaEntity{User: quotaPartToPB(e.User), ClientId: quotaPartToPB(e.ClientID)}
}

func quotaEntityFromPB(e *pb.ClientQuotaEntity) metadata.QuotaEntity {
	if e == nil {
		return metadata.QuotaEntity{}
	}
	return metadata.QuotaEntity{User: quotaPartFromPB(e.User), ClientID: quotaPartFromPB(e.ClientId)}
}

func quotaStateToPB(e metadata.QuotaEntity, values map[string]float64) *pb.ClientQuotaState {
	return &pb.ClientQuotaState{Entity: quotaEntityToPB(e), Values: maps.Clone(values)}
}

func compareQuotaEntities(a, b metadata.QuotaEntity) int {
	if c := compareQuotaParts(a.User, b.User); c != 0 {
		return c
	}
	return compareQuotaParts(a.ClientID, b.ClientID)
}

func compareQuotaParts(a, b metadata.QuotaEntityPart) int {
	key := func(p metadata.QuotaEntityPart) string {
		switch {
		case !p.Set:
			return "0"
		case p.Default:
			return "1"
		}
		return "2" + p.Name
	}
	if ka, kb := key(a), key(b); ka != kb {
		if ka < kb {
			return -1
		}
		return 1
	}
	return 0
}

// clientQuotasToPB lists every entity's values in a stable order.
func clientQuotasToPB(q metadata.ClientQuotas) []*pb.ClientQuotaState {
	var out []*pb.ClientQuotaState
	for _, e := range slices.SortedFunc(maps.Keys(q), compareQuotaEntities) {
		out = append(out, quotaStateToPB(e, q[e]))
	}
	return out
}

// applyClientQuotas returns q with each state's entity replaced.
func applyClientQuotas(q metadata.ClientQuotas, states []*pb.ClientQuotaState) metadata.ClientQuotas {
	for _, st := range states {
		q = q.With(quotaEntityFromPB(st.Entity), maps.Clone(st.Values))
	}
	return q
}

func (f *fsm) applyClientQuotas(c *change, r *pb.ClientQuotasRecord) applyResult {
	for _, st := range r.Quotas {
		if c.quotas == nil {
			c.quotas = map[metadata.QuotaEntity]*pb.ClientQuotaState{}
		}
		c.quotas[quotaEntityFromPB(st.Entity)] = st
	}
	return applyResult{}
}

// quotaDelta lists the change's quota entities for its delta.
func (c *change) quotaDelta() []*pb.ClientQuotaState {
	var out []*pb.ClientQuotaState
	for _, e := range slices.SortedFunc(maps.Keys(c.quotas), compareQuotaEntities) {
		out = append(out, c.quotas[e])
	}
	return out
}

// validateQuotaEntity enforces Kafka's entity shapes: a user, a client id, or a user
// and a client id.
func validateQuotaEntity(e metadata.QuotaEntity) error {
	if !e.User.Set && !e.ClientID.Set {
		return kafkaErrorf(kerr.InvalidRequest, "a client quota entity needs a user, a client id, or both")
	}
	return nil
}

// applyQuotaOps returns an entity's values after ops, as Kafka's ClientQuotaControlManager
// validates them: known keys only, positive values, whole numbers for the rates.
func applyQuotaOps(old map[string]float64, ops []*pb.ClientQuotaOp) (map[string]float64, error) {
	out := maps.Clone(old)
	if out == nil {
		out = map[string]float64{}
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if !slices.Contains(metadata.QuotaKeys, op.Key) {
			return nil, kafkaErrorf(kerr.InvalidRequest, "unknown client quota key %q", op.Key)
		}
		if seen[op.Key] {
			return nil, kafkaErrorf(kerr.InvalidRequest, "client quota key %q altered twice", op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			delete(out, op.Key)
			continue
		}
		if !(op.Value > 0) || math.IsInf(op.Value, 0) {
			return nil, kafkaErrorf(kerr.InvalidRequest, "client quota %s must be positive, not %v", op.Key, op.Value)
		}
		if op.Key != metadata.QuotaRequestPercentage && op.Value != math.Trunc(op.Value) {
			return nil, kafkaErrorf(kerr.InvalidRequest, "client quota %s must be a whole number, not %v", op.Key, op.Value)
		}
		out[op.Key] = op.Value
	}
	return out, nil
}
