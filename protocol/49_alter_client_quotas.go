package protocol

import (
	"context"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// handleAlterClientQuotas changes client quotas through the controller (KIP-546) and
// answers once this broker applies them.
func (s *Server) handleAlterClientQuotas(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	resp.Entries = make([]kmsg.AlterClientQuotasResponseEntry, len(req.Entries))
	denied := !s.allowedCluster(r, opAlterConfigs)
	var alts []metadata.QuotaAlteration
	var pos []int
	for i, e := range req.Entries {
		re := &resp.Entries[i]
		*re = kmsg.NewAlterClientQuotasResponseEntry()
		for _, ent := range e.Entity {
			re.Entity = append(re.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: ent.Type, Name: ent.Name})
		}
		if denied {
			re.ErrorCode = errClusterDenied.Code
			continue
		}
		entity, err := quotaEntity(e.Entity)
		if err != nil {
			re.ErrorCode, re.ErrorMessage = errorCode(err), errorMessage(err)
			continue
		}
		alt := metadata.QuotaAlteration{Entity: entity}
		for _, op := range e.Ops {
			alt.Ops = append(alt.Ops, metadata.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		alts, pos = append(alts, alt), append(pos, i)
	}
	if len(alts) == 0 {
		return Result{Resp: resp}
	}
	store, ok := s.deps.Meta.(metadata.QuotaStore)
	var errs []error
	var err error
	if !ok {
		err = fmt.Errorf("%w: this broker's metadata store keeps no client quotas", kerr.UnsupportedVersion)
	} else {
		errs, err = store.AlterClientQuotas(ctx, alts, req.ValidateOnly)
	}
	for j, i := range pos {
		e := err
		if e == nil && j < len(errs) {
			e = errs[j]
		}
		resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = errorCode(e), errorMessage(e)
	}
	if err == nil && !req.ValidateOnly {
		s.awaitVisible(ctx, func(im *metadata.Image) bool {
			for j, a := range alts {
				if errs[j] == nil && !quotaShows(im.ClientQuotas[a.Entity], a.Ops) {
					return false
				}
			}
			return true
		})
	}
	return Result{Resp: resp}
}

// quotaShows reports whether an entity's values reflect ops.
func quotaShows(values map[string]float64, ops []metadata.QuotaOp) bool {
	want := maps.Clone(values)
	for _, op := range ops {
		v, set := want[op.Key]
		if op.Remove == set || !op.Remove && v != op.Value {
			return false
		}
	}
	return true
}

// quotaEntity converts a request's entity components (a nil name is the default).
func quotaEntity(parts []kmsg.AlterClientQuotasRequestEntryEntity) (metadata.QuotaEntity, error) {
	var e metadata.QuotaEntity
	for _, p := range parts {
		var dst *metadata.QuotaEntityPart
		switch p.Type {
		case quotaEntityUser:
			dst = &e.User
		case quotaEntityClientID:
			dst = &e.ClientID
		case quotaEntityIP:
			return e, fmt.Errorf("%w: Shale has no ip quotas (use max.connections.per.ip)", kerr.InvalidRequest)
		default:
			return e, fmt.Errorf("%w: unknown quota entity type %q", kerr.InvalidRequest, p.Type)
		}
		if dst.Set {
			return e, fmt.Errorf("%w: quota entity type %q given twice", kerr.InvalidRequest, p.Type)
		}
		*dst = metadata.QuotaEntityPart{Set: true, Default: p.Name == nil}
		if p.Name != nil {
			dst.Name = *p.Name
		}
	}
	if !e.User.Set && !e.ClientID.Set {
		return e, fmt.Errorf("%w: a quota entity needs a user, a client id, or both", kerr.InvalidRequest)
	}
	return e, nil
}

// alterClientQuotasAPI: every version kmsg knows.
var alterClientQuotasAPI = api{key: kmsg.AlterClientQuotas, min: 0, max: 1, handle: (*Server).handleAlterClientQuotas}
