package controller

import "strings"

// collisionKey is the name metric systems see: Kafka refuses a topic whose name differs
// from an existing one only by '.' versus '_'.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }
