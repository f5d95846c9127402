package config

import (
	"net"
)

// finishConsole turns the web console's default off on an http.listener that is not
// loopback: the console needs no login unless a SASL listener asks for one, so serving
// it to the network is the operator's explicit choice (console.enable=true).
func (c *Config) finishConsole() {
	if !c.ConsoleEnable || c.HTTPListener == "" || c.origins["console.enable"].explicit() {
		return
	}
	host, _, err := net.SplitHostPort(c.HTTPListener)
	if err != nil || isLoopbackHost(host) {
		return
	}
	c.ConsoleEnable = false
	c.Warnings = append(c.Warnings, "the web console is off: http.listener "+c.HTTPListener+
		" is not a loopback address; set console.enable=true to serve it there")
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
