package replication

// LogDir is the directory this broker's replicas live in (log.dirs; one directory).
func (m *Manager) LogDir() string { return m.cfg.LogDir }
