package main

import "syscall"

const (
	sysGetrandom   = syscall.SYS_GETRANDOM
	sysMemfdCreate = syscall.SYS_MEMFD_CREATE
)
