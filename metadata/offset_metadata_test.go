package metadata

import (
	"strings"
	"testing"
)

func TestOffsetMetadataFits(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
		max  int
		want bool
	}{
		{"empty", "", 0, true},
		{"ascii at the limit", strings.Repeat("a", 4), 4, true},
		{"ascii over the limit", strings.Repeat("a", 5), 4, false},
		// é is 2 bytes in UTF-8 but one UTF-16 unit: 4 of them fit in 4 although
		// they take 8 bytes.
		{"two-byte runes count one", strings.Repeat("é", 4), 4, true},
		{"two-byte runes over", strings.Repeat("é", 5), 4, false},
		// 日 is 3 bytes, one unit.
		{"three-byte runes count one", strings.Repeat("日", 4), 4, true},
		// 😀 (U+1F600) is 4 bytes and a surrogate pair: two units.
		{"supplementary runes count two", strings.Repeat("😀", 2), 4, true},
		{"supplementary runes over", strings.Repeat("😀", 2) + "a", 4, false},
		{"supplementary rune across the limit", "abc😀", 4, false},
		{"mixed at the limit", "aé日😀", 5, true},
		{"mixed over", "aé日😀", 4, false},
		// Invalid UTF-8 decodes to one U+FFFD per bad byte, one unit each.
		{"invalid bytes count one each", "\xff\xfe\xfd", 3, true},
		{"invalid bytes over", "\xff\xfe\xfd\xfc", 3, false},
		{"default limit", strings.Repeat("日", DefaultOffsetMetadataMaxBytes), DefaultOffsetMetadataMaxBytes, true},
		{"default limit over", strings.Repeat("日", DefaultOffsetMetadataMaxBytes) + "a", DefaultOffsetMetadataMaxBytes, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OffsetMetadataFits(tc.s, tc.max); got != tc.want {
				t.Fatalf("OffsetMetadataFits(%q, %d) = %v, want %v", tc.s, tc.max, got, tc.want)
			}
		})
	}
}
