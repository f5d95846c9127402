// Package tiered is the home of tiered storage (KIP-405): closed segments of a topic with
// remote.storage.enable=true are copied to an object store (tiered/objstore) and history
// below the local log start is read back from it. The replica manager decides when a
// segment is uploaded and when a local copy may go; the packages here store and read.
package tiered
