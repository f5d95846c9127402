package config

import (
	"encoding/base64"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// parseListener parses NAME://host:port; IPv6 hosts are bracketed ([::1]:9092).
func parseListener(s string) (Listener, error) {
	name, addr, ok := strings.Cut(s, "://")
	if !ok {
		return Listener{}, fmt.Errorf("listener %q is not NAME://host:port", s)
	}
	name = strings.ToUpper(strings.TrimSpace(name))
	if name == "" {
		return Listener{}, fmt.Errorf("listener %q has no name", s)
	}
	for _, r := range name {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return Listener{}, fmt.Errorf("listener %q: name may hold only letters, digits, _ and -", s)
		}
	}
	hp, err := parseHostPort(addr)
	if err != nil {
		return Listener{}, fmt.Errorf("listener %q: %w", s, err)
	}
	return Listener{Name: name, Host: hp.host, Port: hp.port}, nil
}

type hostPort struct {
	host string
	port int
}

func parseHostPort(addr string) (hostPort, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		if !strings.Contains(addr, ":") || strings.HasSuffix(addr, "]") {
			return hostPort{}, fmt.Errorf("%q has no port (want host:port)", addr)
		}
		return hostPort{}, fmt.Errorf("%q is not host:port", addr)
	}
	if portText == "" {
		return hostPort{}, fmt.Errorf("%q has no port (want host:port)", addr)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return hostPort{}, fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, portText)
	}
	return hostPort{host: host, port: port}, nil
}

func setListeners(field func(*Config) *[]Listener) func(*Config, string) error {
	return func(c *Config, v string) error {
		var ls []Listener
		for _, item := range splitList(v) {
			l, err := parseListener(item)
			if err != nil {
				return err
			}
			for _, prev := range ls {
				if prev.Name == l.Name {
					return fmt.Errorf("listener name %s is used twice", l.Name)
				}
				if prev.Port == l.Port && l.Port != 0 && (prev.Host == l.Host || isWildcard(prev.Host) || isWildcard(l.Host)) {
					return fmt.Errorf("listeners %s and %s use the same port %d", prev.Name, l.Name, l.Port)
				}
			}
			ls = append(ls, l)
		}
		*field(c) = ls
		return nil
	}
}

func getListeners(field func(*Config) []Listener) func(*Config) string {
	return func(c *Config) string {
		items := make([]string, 0, len(field(c)))
		for _, l := range field(c) {
			items = append(items, l.String())
		}
		return strings.Join(items, ",")
	}
}

// isWildcard reports whether a listener host binds every interface.
func isWildcard(host string) bool { return host == "" || host == "0.0.0.0" || host == "::" }

func setVoters(c *Config, v string) error {
	c.ControllerQuorumVoters = nil
	for _, item := range splitList(v) {
		idText, addr, ok := strings.Cut(item, "@")
		if !ok {
			return fmt.Errorf("voter %q is not id@host:port", item)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(idText), 10, 32)
		if err != nil || id < 0 {
			return fmt.Errorf("voter %q: id %q is not a node id", item, idText)
		}
		hp, err := parseHostPort(addr)
		if err != nil {
			return fmt.Errorf("voter %q: %w", item, err)
		}
		if hp.host == "" || hp.port == 0 || isWildcard(hp.host) {
			return fmt.Errorf("voter %q: needs a host and port that other nodes can reach", item)
		}
		for _, prev := range c.ControllerQuorumVoters {
			if prev.ID == int32(id) {
				return fmt.Errorf("voter id %d is listed twice", id)
			}
		}
		c.ControllerQuorumVoters = append(c.ControllerQuorumVoters, Voter{ID: int32(id), Host: hp.host, Port: hp.port})
	}
	return nil
}

// setBootstrapServers parses controller.quorum.bootstrap.servers, host:port,...
func setBootstrapServers(c *Config, v string) error {
	c.ControllerQuorumBootstrapServers = nil
	for _, item := range splitList(v) {
		if strings.Contains(item, "@") {
			return fmt.Errorf("bootstrap server %q: want host:port, without the id@ of controller.quorum.voters", item)
		}
		hp, err := parseHostPort(item)
		if err != nil {
			return fmt.Errorf("bootstrap server %q: %w", item, err)
		}
		if hp.host == "" || hp.port == 0 || isWildcard(hp.host) {
			return fmt.Errorf("bootstrap server %q: needs a host and port that other nodes can reach", item)
		}
		c.ControllerQuorumBootstrapServers = append(c.ControllerQuorumBootstrapServers, net.JoinHostPort(hp.host, strconv.Itoa(int(hp.port))))
	}
	return nil
}

func getVoters(c *Config) string {
	items := make([]string, 0, len(c.ControllerQuorumVoters))
	for _, v := range c.ControllerQuorumVoters {
		items = append(items, v.String())
	}
	return strings.Join(items, ",")
}

// checkClusterID accepts what Kafka's storage tool writes: a UUID in 22 characters of
// URL-safe base64 without padding.
func checkClusterID(id string) error {
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) != 16 {
		return fmt.Errorf("%q is not a 22-character base64 UUID (like kafka-storage.sh random-uuid prints)", id)
	}
	return nil
}
