package controller

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Voter is one member of the controller quorum, as controller.quorum.voters names it.
type Voter struct {
	ID   int32
	Addr string // host:port of the voter's CONTROLLER listener
}

// ParseVoters parses controller.quorum.voters: "1@host:port,2@host:port". Ids must be
// unique and non-negative, addresses unique and host:port shaped. The result is sorted by id.
func ParseVoters(s string) ([]Voter, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("controller.quorum.voters is empty")
	}
	var voters []Voter
	ids := map[int32]bool{}
	addrs := map[string]bool{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		idStr, addr, ok := strings.Cut(entry, "@")
		if !ok {
			return nil, fmt.Errorf("controller.quorum.voters entry %q: want id@host:port", entry)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(idStr), 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("controller.quorum.voters entry %q: id must be a non-negative integer", entry)
		}
		addr = strings.TrimSpace(addr)
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("controller.quorum.voters entry %q: %w", entry, err)
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return nil, fmt.Errorf("controller.quorum.voters entry %q: bad port %q", entry, port)
		}
		if host == "" {
			return nil, fmt.Errorf("controller.quorum.voters entry %q: host is empty", entry)
		}
		if ids[int32(id)] {
			return nil, fmt.Errorf("controller.quorum.voters: id %d listed twice", id)
		}
		if addrs[addr] {
			return nil, fmt.Errorf("controller.quorum.voters: address %s listed twice", addr)
		}
		ids[int32(id)], addrs[addr] = true, true
		voters = append(voters, Voter{ID: int32(id), Addr: addr})
	}
	slices.SortFunc(voters, func(a, b Voter) int { return int(a.ID) - int(b.ID) })
	return voters, nil
}

// FormatVoters is the inverse of ParseVoters.
func FormatVoters(voters []Voter) string {
	parts := make([]string, len(voters))
	for i, v := range voters {
		parts[i] = fmt.Sprintf("%d@%s", v.ID, v.Addr)
	}
	return strings.Join(parts, ",")
}
