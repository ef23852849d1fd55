// Command hwk makes hybrid Linux + Windows Kubernetes clusters on one
// workstation.
package main

import (
	"os"

	"github.com/hwk-dev/hwk/pkg/cmd"
)

func main() {
	os.Exit(cmd.Main(os.Args[1:], cmd.StdStreams()))
}
