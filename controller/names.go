package controller

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// maxTopicNameLength is Kafka's limit (249: a partition directory name must fit in 255).
const maxTopicNameLength = 249

// validateTopicName applies Kafka's topic name rules.
func validateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: topic name is empty", kerr.InvalidTopicException)
	case name == "." || name == "..":
		return fmt.Errorf("%w: topic name cannot be %q", kerr.InvalidTopicException, name)
	case len(name) > maxTopicNameLength:
		return fmt.Errorf("%w: topic name is longer than %d characters", kerr.InvalidTopicException, maxTopicNameLength)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: topic name %q contains a character other than ASCII alphanumerics, '.', '_' and '-'",
				kerr.InvalidTopicException, name)
		}
	}
	return nil
}

// collisionKey is the name metric systems see: Kafka refuses a topic whose name differs
// from an existing one only by '.' versus '_'.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }
