package replication

import (
	"errors"
	"fmt"

	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
)

// Broker-side schema ID validation (Confluent Server's confluent.key.schema.validation
// and confluent.value.schema.validation): the leader refuses a produced batch with
// INVALID_RECORD when a record's non-null key or value does not carry, in the wire
// format of Confluent's serializers, a schema id registered under the subject the
// topic's strategy names. Registered means under any version of that subject that has
// not been permanently deleted: a soft-deleted version still passes, so that producers
// holding the id keep working until it is gone for good, as in Confluent's and
// Redpanda's brokers. The registry is the one in this broker's metadata image, so a
// check costs no request to the controller; a schema registered through another broker
// is seen once this broker's metadata has caught up with it.

// RecordNamer names the record a schema id's data carries, for the record name
// strategies: an Avro schema's full name, a JSON Schema's title, and for Protobuf the
// full name of the message the data's message indexes select. The node gives the
// schema registry's (schemaregistry.RecordNames); without one those strategies refuse
// every record they check.
type RecordNamer interface {
	RecordName(reg *metadata.SchemaRegistry, id int32, data []byte) (string, error)
}

// errNoRecordNamer is the reason a record name strategy refuses without a RecordNamer.
var errNoRecordNamer = errors.New("this broker cannot name records for the record name strategies")

// schemaIDChecker checks one batch's schema ids (records.SchemaIDChecker). It lives as
// long as the batch's validation, so what it remembers cannot go stale.
type schemaIDChecker struct {
	reg    *metadata.SchemaRegistry
	topic  string
	policy records.SchemaIDPolicy
	namer  RecordNamer
	// subjects are the TopicNameStrategy subjects, <topic>-key and <topic>-value.
	subjects [2]string
	// passed remembers, per field, the last id and subject that passed: a batch's
	// records nearly always share their schema, so most records cost a comparison.
	passed [2]struct {
		id      int32
		subject string
		ok      bool
	}
}

func newSchemaIDChecker(topic string, policy records.SchemaIDPolicy, reg *metadata.SchemaRegistry, namer RecordNamer) *schemaIDChecker {
	return &schemaIDChecker{
		reg: reg, topic: topic, policy: policy, namer: namer,
		subjects: [2]string{topic + "-key", topic + "-value"},
	}
}

// CheckSchemaID implements records.SchemaIDChecker.
func (c *schemaIDChecker) CheckSchemaID(f records.SchemaField, id int32, data []byte) error {
	strategy := c.policy.Strategy(f)
	last := &c.passed[f]
	if strategy == records.TopicNameStrategy && last.ok && last.id == id {
		return nil
	}
	subject, err := c.subject(f, strategy, id, data)
	if err != nil {
		return err
	}
	if last.ok && last.id == id && last.subject == subject {
		return nil
	}
	if !registeredUnder(c.reg, subject, id) {
		return fmt.Errorf("%s schema id %d is not registered under subject %q (%s)", f, id, subject, strategy)
	}
	last.id, last.subject, last.ok = id, subject, true
	return nil
}

// subject names the subject id must be registered under.
func (c *schemaIDChecker) subject(f records.SchemaField, strategy records.SubjectNameStrategy, id int32, data []byte) (string, error) {
	if strategy == records.TopicNameStrategy {
		return c.subjects[f], nil
	}
	if c.reg.Schema(id) == nil {
		return "", fmt.Errorf("%s schema id %d is not registered", f, id)
	}
	if c.namer == nil {
		return "", fmt.Errorf("%s schema id %d: %w", f, id, errNoRecordNamer)
	}
	name, err := c.namer.RecordName(c.reg, id, data)
	if err != nil {
		return "", fmt.Errorf("%s schema id %d names no record for %s: %w", f, id, strategy, err)
	}
	if strategy == records.TopicRecordNameStrategy {
		return c.topic + "-" + name, nil
	}
	return name, nil
}

// registeredUnder reports whether one of subject's versions, soft-deleted or not, has
// schema id.
func registeredUnder(reg *metadata.SchemaRegistry, subject string, id int32) bool {
	if reg == nil {
		return false
	}
	for _, v := range reg.Subjects[subject] {
		if v.SchemaID == id {
			return true
		}
	}
	return false
}

// schemaRegistry is the newest registry state this broker has: the store's current
// image, or the applied one when that is newer (a driven manager's store may lag the
// images it is handed).
func (m *Manager) schemaRegistry() *metadata.SchemaRegistry {
	im := m.store.Current()
	if a := m.applied.Load(); a != nil && (im == nil || a.Offset > im.Offset) {
		im = a
	}
	if im == nil {
		return nil
	}
	return im.SchemaRegistry
}

// schemaIDs is the validation a batch for topic gets under policy.
func (m *Manager) schemaIDs(topic string, policy records.SchemaIDPolicy) records.SchemaIDs {
	if !policy.On() {
		return records.SchemaIDs{}
	}
	return records.SchemaIDs{
		Key: policy.Key, Value: policy.Value,
		Checker: newSchemaIDChecker(topic, policy, m.schemaRegistry(), m.cfg.RecordNamer),
	}
}
