package gate

import "github.com/google/uuid"

// NewIncidentID returns a unique, time-sortable ID: a UUIDv7 (RFC 9562), whose leading 48 bits
// are the Unix time in milliseconds and whose sequence bits keep IDs from one process
// increasing within a millisecond. Should the random source fail, the gate still answers: a
// decision without a well-formed ID is better than no decision, so the ID says so instead.
func NewIncidentID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return "incident-id-unavailable"
	}
	return id.String()
}
