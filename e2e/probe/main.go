// Command probe is the workload of hwk's end-to-end tests: a static binary
// packed into an image the tests import into the nodes (no registry is
// needed). "probe serve" answers HTTP with the pod's name; "probe check"
// resolves names and fetches URLs, printing each result, and fails if any
// does.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe serve | probe check [NAME|URL]...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		host, _ := os.Hostname()
		http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "hello from %s\n", host) })
		fmt.Println("serving on :8080")
		if err := http.ListenAndServe(":8080", nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "check":
		failed := false
		for _, arg := range os.Args[2:] {
			if err := check(arg); err != nil {
				fmt.Printf("FAIL %s: %v\n", arg, err)
				failed = true
			}
		}
		if failed {
			os.Exit(1)
		}
	case "udp-serve":
		// udp-serve PORT: print each datagram and where it came from.
		pc, err := net.ListenPacket("udp", ":"+os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Printf("got %q from %s\n", buf[:n], from)
		}
	case "udp-send":
		// udp-send ADDR:PORT LOCALPORT: a datagram every 200ms, always
		// from the same local port, so every one is the same flow.
		local, _ := net.ResolveUDPAddr("udp", ":"+os.Args[3])
		remote, err := net.ResolveUDPAddr("udp", os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		conn, err := net.DialUDP("udp", local, remote)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(conn, "ping %d", i); err != nil {
				fmt.Println("send:", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}

// check resolves a name, or GETs a URL (http://...), retrying for a while:
// a new pod's network can take a moment.
func check(arg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		if len(arg) > 7 && arg[:7] == "http://" {
			last = get(ctx, arg)
		} else {
			var addrs []string
			addrs, last = net.DefaultResolver.LookupHost(ctx, arg)
			if last == nil {
				fmt.Printf("OK resolve %s = %v\n", arg, addrs)
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return last
}

func get(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Printf("OK get %s = %d %s", url, resp.StatusCode, body)
	return nil
}
