package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// property is one key/value pair read from a properties file, with the line its logical
// line starts on (for messages that point at the file).
type property struct {
	key, value string
	line       int
}

// parseProperties reads text in Java's .properties format, as Kafka reads
// server.properties: a logical line is a natural line plus continuations (a line ending
// in an odd number of backslashes continues on the next, whose leading whitespace is
// dropped); lines whose first non-blank character is '#' or '!' are comments; the key
// runs up to the first unescaped '=', ':' or whitespace, and the separator may be
// surrounded by whitespace; \t \n \r \f \uXXXX are escapes and a backslash before any
// other character stands for that character. Java reads bytes as ISO-8859-1; Shale reads
// UTF-8, which agrees for ASCII files and for \u escapes. Later duplicates win, as in Java.
func parseProperties(text string) ([]property, error) {
	var props []property
	lines := splitNaturalLines(text)
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue // Java: a comment line is never continued.
		}
		for continues(line) && i+1 < len(lines) {
			line = line[:len(line)-1] + strings.TrimLeft(lines[i+1], " \t\f")
			i++
		}
		if continues(line) {
			line = line[:len(line)-1] // a continuation at end of file continues into nothing
		}
		key, value, err := splitKeyValue(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		props = append(props, property{key: key, value: value, line: start})
	}
	return props, nil
}

func splitNaturalLines(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	return strings.Split(text, "\n")
}

// continues reports whether a line ends in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func splitKeyValue(line string) (key, value string, err error) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++ // the escaped character belongs to the key
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	rest := strings.TrimLeft(line[end:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	if key, err = unescape(line[:end]); err != nil {
		return "", "", err
	}
	if value, err = unescape(rest); err != nil {
		return "", "", fmt.Errorf("value of %s: %w", key, err)
	}
	return key, value, nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break // a lone trailing backslash stands for nothing, as in Java
		}
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uxxxx escape %q", s[i-1:])
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\uxxxx escape %q", s[i-1:i+5])
			}
			r := rune(n)
			// A surrogate pair arrives as two escapes; join them into one rune.
			if utf16High(r) && i+11 <= len(s) && s[i+5] == '\\' && s[i+6] == 'u' {
				if lo, err := strconv.ParseUint(s[i+7:i+11], 16, 16); err == nil && utf16Low(rune(lo)) {
					r = (r-0xD800)<<10 + (rune(lo) - 0xDC00) + 0x10000
					i += 6
				}
			}
			if !utf8.ValidRune(r) {
				r = utf8.RuneError
			}
			b.WriteRune(r)
			i += 4
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func utf16High(r rune) bool { return r >= 0xD800 && r < 0xDC00 }
func utf16Low(r rune) bool  { return r >= 0xDC00 && r < 0xE000 }
