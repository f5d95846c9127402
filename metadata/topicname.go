package metadata

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// MaxTopicNameLength is Kafka's limit on topic names: a partition's directory name
// (topic, '-', partition number) must fit in 255 characters.
const MaxTopicNameLength = 249

// ValidateTopicName applies Kafka's topic naming rules: 1 to 249 characters from
// [a-zA-Z0-9._-], and not "." or "..". Errors wrap INVALID_TOPIC_EXCEPTION.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: topic name is empty", kerr.InvalidTopicException)
	case name == "." || name == "..":
		return fmt.Errorf("%w: topic name cannot be %q", kerr.InvalidTopicException, name)
	case len(name) > MaxTopicNameLength:
		return fmt.Errorf("%w: topic name is %d characters, more than %d", kerr.InvalidTopicException, len(name), MaxTopicNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q contains %q; only ASCII letters, digits, '.', '_' and '-' are allowed", kerr.InvalidTopicException, name, c)
		}
	}
	return nil
}
