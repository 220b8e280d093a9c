package sse_test

import "net"

// listen binds a free loopback port.
func listen() (net.Listener, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	return ln, "http://" + ln.Addr().String()
}
