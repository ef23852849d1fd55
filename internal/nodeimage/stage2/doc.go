// Package stage2 chooses the Linux kernel a node image build's second
// stage runs in: the Docker engine, WSL 2, or a VM of a driver that boots
// kernels (drivers.KernelBooter).
package stage2
