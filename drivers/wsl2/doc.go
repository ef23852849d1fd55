// Package wsl2 will run Linux nodes as WSL2 distributions (experimental).
package wsl2
