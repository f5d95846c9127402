package interop

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// cellStatus is one cell's outcome in the results matrix.
type cellStatus string

const (
	statusPass        cellStatus = "pass"
	statusFail        cellStatus = "FAIL"
	statusUnsupported cellStatus = "unsupported"
	statusSkipped     cellStatus = "skipped"
)

type cellResult struct {
	status cellStatus
	note   string
}

// matrix gathers cell results from tests running in parallel.
type matrix struct {
	mu      sync.Mutex
	clients []string
	cells   map[string]map[string]cellResult // client -> codec -> result
	extra   []string                         // results of tests outside the grid
}

func newMatrix() *matrix {
	return &matrix{cells: map[string]map[string]cellResult{}}
}

func (m *matrix) record(client, codec string, status cellStatus, note string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cells[client] == nil {
		m.cells[client] = map[string]cellResult{}
		m.clients = append(m.clients, client)
	}
	m.cells[client][codec] = cellResult{status: status, note: note}
}

func (m *matrix) recordExtra(line string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.extra = append(m.extra, line)
}

// markdown renders the grid, then notes for every cell that did not pass, then the
// results of tests outside the grid. It is empty when nothing was recorded.
func (m *matrix) markdown(targetName string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.clients) == 0 && len(m.extra) == 0 {
		return ""
	}
	clients := slices.Clone(m.clients)
	slices.SortFunc(clients, func(a, b string) int { return clientOrder(a) - clientOrder(b) })
	var b strings.Builder
	fmt.Fprintf(&b, "Target: %s\n\n", targetName)
	if len(clients) > 0 {
		fmt.Fprintf(&b, "| client | %s |\n|---|%s\n", strings.Join(codecs, " | "), strings.Repeat("---|", len(codecs)))
	}
	var notes []string
	for _, c := range clients {
		row := make([]string, len(codecs))
		for i, codec := range codecs {
			r, ok := m.cells[c][codec]
			if !ok {
				row[i] = "-"
				continue
			}
			row[i] = string(r.status)
			if r.status != statusPass && r.note != "" {
				notes = append(notes, fmt.Sprintf("- %s / %s: %s: %s", c, codec, r.status, r.note))
			}
		}
		fmt.Fprintf(&b, "| %s | %s |\n", c, strings.Join(row, " | "))
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	if len(m.extra) > 0 {
		extra := slices.Clone(m.extra)
		slices.Sort(extra)
		b.WriteString("\n" + strings.Join(extra, "\n") + "\n")
	}
	return b.String()
}

// clientOrder keeps the grid in the order the suite documents its clients.
func clientOrder(client string) int {
	order := []string{"franz-go", "sarama", "kafka-go", "kcat", "confluent-kafka-python", "kafka-python", "kafkajs"}
	if i := slices.Index(order, client); i >= 0 {
		return i
	}
	return len(order)
}
