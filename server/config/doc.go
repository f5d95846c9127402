// Package config holds a Shale node's settings under Kafka's own broker config names
// (node.id, listeners, log.dirs, log.retention.hours, ...) with Kafka's defaults, and
// loads them from, in increasing precedence: the defaults, a Java properties file
// (--config server.properties), SHALE_* environment variables (SHALE_LOG_DIRS for
// log.dirs) and command-line flags of the same names (--log.dirs=DIR).
//
// Keys Kafka reads but Shale does not know are common in real server.properties files, so
// a file or environment variable naming one only produces a warning (Config.Warnings);
// an unknown flag is an error, because a typo on the command line should not go unnoticed.
package config
