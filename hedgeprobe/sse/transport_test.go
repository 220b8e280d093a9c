package sse

import (
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestTransportSocketOptions(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_USER_TIMEOUT is Linux-only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.Close()
		}
	}()
	tr := NewTransport(TransportOptions{UserTimeout: 42 * time.Second, KeepAliveIdle: 7 * time.Second})
	defer tr.CloseIdleConnections()
	conn, err := tr.DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var userTimeout, keepalive, idle int
	var gerr error
	_ = raw.Control(func(fd uintptr) {
		if userTimeout, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT); gerr != nil {
			return
		}
		if keepalive, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE); gerr != nil {
			return
		}
		idle, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
	})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if userTimeout != 42000 || keepalive == 0 || idle != 7 {
		t.Fatalf("TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d, TCP_KEEPIDLE %d s", userTimeout, keepalive, idle)
	}
	if tr.HTTP2 == nil || tr.HTTP2.SendPingTimeout != 7*time.Second {
		t.Fatalf("http2 pings %+v", tr.HTTP2)
	}
	if DefaultClient().Timeout != 0 {
		t.Fatal("default client has a whole-request timeout")
	}
	if c := NewTransport(TransportOptions{HTTP2PingAfter: 3 * time.Second, HTTP2PingTimeout: 2 * time.Second}).HTTP2; c.SendPingTimeout != 3*time.Second || c.PingTimeout != 2*time.Second {
		t.Fatalf("http2 pings %+v, want 3s and 2s", c)
	}
	if c := NewTransport(TransportOptions{}).HTTP2; c.SendPingTimeout != 15*time.Second || c.PingTimeout != 15*time.Second {
		t.Fatalf("http2 pings by default %+v, want 15s and 15s", c)
	}
}
