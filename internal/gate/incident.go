package gate

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// NewIncidentID returns a unique, time-sortable ID: a UUIDv7 (RFC 9562), whose leading 48 bits
// are the Unix time in milliseconds and whose 12 rand_a bits count the IDs of one millisecond
// (RFC 9562 section 6.2, method 3), so IDs from one process strictly increase; the 62 rand_b
// bits are random (the runtime's ChaCha8, seeded by the OS), so IDs of two processes do not
// collide. It costs a clock read and one allocation, the string: every decision carries one.
func NewIncidentID() string {
	seq := incidentClock.next(time.Now().UnixMilli())
	ms, count := seq>>12, seq&0xfff
	var u [16]byte
	binary.BigEndian.PutUint64(u[0:8], ms<<16|0x7000|count)
	binary.BigEndian.PutUint64(u[8:16], rand.Uint64()&(1<<62-1)|1<<63)
	return formatUUID(&u)
}

// incidentClock hands out (milliseconds << 12 | count) values that strictly increase: the
// current millisecond with count 0, or one more than the last value when that is later (many
// IDs in one millisecond, or a clock that stepped back).
var incidentClock monotonicIDs

type monotonicIDs struct{ last atomic.Uint64 }

func (m *monotonicIDs) next(nowMS int64) uint64 {
	now := uint64(max(nowMS, 0)) << 12
	for {
		last := m.last.Load()
		next := max(now, last+1)
		if m.last.CompareAndSwap(last, next) {
			return next
		}
	}
}

// formatUUID writes u in the 8-4-4-4-12 form.
func formatUUID(u *[16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}
