package decisionlog

import "sync"

// Memory is a Sink that keeps every record, for tests. The zero value is ready.
type Memory struct {
	mu      sync.Mutex
	records []Record
}

// Emit keeps rec.
func (m *Memory) Emit(rec Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records = append(m.records, rec)
}

// Records are the records kept so far, oldest first.
func (m *Memory) Records() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Record(nil), m.records...)
}

// Len is the number of records kept so far.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}
