// Package hostmem reads how much physical memory the host has and how
// much of it is available to start programs and VMs with, as the OS
// itself counts it (Linux's MemAvailable, Windows' ullAvailPhys, which
// both count reclaimable cache as available).
package hostmem

// Read returns the host's total and available physical memory in bytes.
func Read() (total, available uint64, err error) { return read() }
