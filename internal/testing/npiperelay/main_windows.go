// Command npiperelay serves a Windows named pipe that relays each
// connection to a TCP address, then runs a command and exits with its
// status: the Wine end-to-end test's stand-in for Docker Desktop's
// \\.\pipe\docker_engine, relaying to this machine's engine (through the
// test's loopback relay), so that hwk.exe dials the pipe it dials on
// Windows when DOCKER_HOST is unset. The pipe lives as long as the
// command runs, in the same Wine session (named pipes are the
// wineserver's).
//
//	npiperelay -pipe \\.\pipe\docker_engine -to 127.0.0.1:2375 -- hwk.exe up ...
//
// The pipe is served as the Docker engine serves it on Windows: in
// message mode, so that a client's CloseWrite (go-winio writes a
// zero-byte message) ends its side, as `docker exec -i` needs (moby
// daemon/listeners/listeners_windows.go: "Use message mode so that
// CloseWrite() is supported"). It is made with blocking CreateNamedPipe
// and ConnectNamedPipe, one instance per client, not go-winio's
// ListenPipe: under Wine 10 that one's overlapped ConnectNamedPipe never
// completes (a client connects and its writes time out), while hwk's
// side, go-winio's DialPipe as Docker's client uses it, works against
// this server.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"

	"golang.org/x/sys/windows"
)

func main() {
	pipe := flag.String("pipe", `\\.\pipe\docker_engine`, "the pipe to serve")
	to := flag.String("to", "", "the TCP address each connection goes to")
	flag.Parse()
	if *to == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: npiperelay [-pipe PIPE] -to HOST:PORT -- COMMAND [ARG...]")
		os.Exit(2)
	}
	name, err := windows.UTF16PtrFromString(*pipe)
	if err != nil {
		fmt.Fprintf(os.Stderr, "npiperelay: %s: %v\n", *pipe, err)
		os.Exit(2)
	}
	// The first instance before the command starts, so that its first
	// dial finds the pipe.
	first, err := instance(name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "npiperelay: create %s: %v\n", *pipe, err)
		os.Exit(2)
	}
	go serve(first, name, *to)
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "npiperelay: %v\n", err)
		os.Exit(2)
	}
}

// instance makes one instance of the pipe, for one client.
func instance(name *uint16) (windows.Handle, error) {
	return windows.CreateNamedPipe(name, windows.PIPE_ACCESS_DUPLEX,
		windows.PIPE_TYPE_MESSAGE|windows.PIPE_READMODE_BYTE|windows.PIPE_WAIT,
		windows.PIPE_UNLIMITED_INSTANCES, 64<<10, 64<<10, 0, nil)
}

// serve waits for a client on h, makes the next instance for the next
// client, and relays this one.
func serve(h windows.Handle, name *uint16, to string) {
	for {
		if err := windows.ConnectNamedPipe(h, nil); err != nil && err != windows.ERROR_PIPE_CONNECTED {
			fmt.Fprintf(os.Stderr, "npiperelay: connect: %v\n", err)
			windows.CloseHandle(h)
			return
		}
		next, err := instance(name)
		go relay(os.NewFile(uintptr(h), "pipe"), to)
		if err != nil {
			fmt.Fprintf(os.Stderr, "npiperelay: create the next instance: %v\n", err)
			return
		}
		h = next
	}
}

// relay copies both ways until either side ends.
func relay(c *os.File, to string) {
	defer c.Close()
	e, err := net.Dial("tcp", to)
	if err != nil {
		fmt.Fprintf(os.Stderr, "npiperelay: dial %s: %v\n", to, err)
		return
	}
	defer e.Close()
	go func() {
		// The client's end of input: a zero-byte message, or the pipe
		// closed.
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if _, werr := e.Write(buf[:n]); werr != nil {
					break
				}
			}
			if n == 0 || err != nil {
				break
			}
		}
		e.(*net.TCPConn).CloseWrite()
	}()
	// The engine's end: the pipe is closed, which the client reads as
	// its end.
	io.Copy(c, e)
}
