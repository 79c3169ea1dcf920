package main

// System calls package syscall has no number for on amd64 (its table predates them).
const (
	sysGetrandom   = 318
	sysMemfdCreate = 319
)
