// Package flagusage prints a flag set's flags the way shale's commands
// show them in --help: as --name, which is how Kafka's tools spell them
// (the flag package accepts -name too), each with its value's name and its
// default.
package flagusage

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Print writes every flag of fs, sorted by name.
func Print(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		if name != "" {
			name = " " + name
		}
		fmt.Fprintf(w, "  --%s%s\n        %s", f.Name, name, strings.ReplaceAll(text, "\n", "\n        "))
		switch def := f.DefValue; {
		case def == "" || def == "false" || def == "0":
		case strings.TrimSpace(def) != def || strings.ContainsAny(def, "\t\n"):
			fmt.Fprintf(w, " (default %s)", strconv.Quote(def))
		default:
			fmt.Fprintf(w, " (default %s)", def)
		}
		fmt.Fprintln(w)
	})
}
