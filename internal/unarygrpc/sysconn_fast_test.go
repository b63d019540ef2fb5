//go:build linux && (amd64 || arm64)

package unarygrpc

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns a sysConn and the plain TCP connection at its other end.
func tcpPair(t *testing.T) (*sysConn, *net.TCPConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	peer, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	c := <-accepted
	if c == nil {
		t.Fatal("accept failed")
	}
	sc, err := newSysConn(c.(*net.TCPConn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return sc, peer.(*net.TCPConn)
}

func TestFastIOOnlyWrapsTCPUninstrumented(t *testing.T) {
	sc, peer := tcpPair(t)
	got := fastIO(sc.tc)
	if _, wrapped := got.(*sysConn); wrapped == instrumented {
		t.Errorf("fastIO(TCP) = %T in a build instrumented %v", got, instrumented)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if fastIO(a) != a {
		t.Error("fastIO wrapped a connection that is not TCP")
	}
	_ = peer
}

// Both directions carry 8 MiB of random bytes intact, while the other side
// reads and writes in small pieces with pauses, so that the sysConn's
// writes fill the socket's buffer (EAGAIN, partial writes) and its reads
// find nothing (EAGAIN) and wait in the poller.
func TestSysConnCarriesBytesBothWays(t *testing.T) {
	sc, peer := tcpPair(t)
	out := make([]byte, 8<<20)
	in := make([]byte, 8<<20)
	rand.Read(out)
	rand.Read(in)

	// sysConn → peer, the peer reading slowly.
	done := make(chan []byte)
	go func() {
		var got bytes.Buffer
		buf := make([]byte, 64<<10)
		for got.Len() < len(out) {
			n, err := peer.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
			if got.Len()%(1<<20) < len(buf) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		done <- got.Bytes()
	}()
	n, err := sc.Write(out)
	if err != nil || n != len(out) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(out))
	}
	if got := <-done; !bytes.Equal(got, out) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(got), len(out))
	}

	// peer → sysConn, the peer writing in pieces with pauses.
	go func() {
		for i := 0; i < len(in); i += 1 << 20 {
			if _, err := peer.Write(in[i : i+1<<20]); err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		_ = peer.CloseWrite()
	}()
	got, err := io.ReadAll(sc)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	if !bytes.Equal(got, in) {
		t.Fatalf("read %d bytes, not the %d the peer wrote", len(got), len(in))
	}
	// After the peer's FIN, reads keep answering EOF.
	if n, err := sc.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("Read after EOF = %d, %v; want 0, EOF", n, err)
	}
	if n, err := sc.Read(nil); n != 0 || err != nil {
		t.Errorf("Read(nil) = %d, %v; want 0, nil", n, err)
	}
}

func TestSysConnDeadlinesAndClose(t *testing.T) {
	sc, peer := tcpPair(t)

	// A read deadline ends a read that waits.
	if err := sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := sc.Read(make([]byte, 10))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v, want a deadline error", err)
	}
	if took := time.Since(start); took < 40*time.Millisecond {
		t.Errorf("Read returned after %v, before its deadline", took)
	}
	if err := sc.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}

	// A write deadline ends a write the peer never reads.
	if err := sc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := sc.Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) || n == 0 || n == 64<<20 {
		t.Fatalf("Write to a peer that does not read = %d, %v; want part written and a deadline error", n, err)
	}
	if err := sc.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}

	// CloseWrite (of the TCP connection underneath) gives the peer EOF
	// after what was written.
	go func() { _, _ = io.Copy(io.Discard, peer) }()
	if err := sc.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	if _, err := sc.Write([]byte("x")); err == nil {
		t.Error("Write after CloseWrite succeeded")
	}

	// Close ends a read that waits, with net.ErrClosed.
	errc := make(chan error, 1)
	go func() {
		_, err := sc.Read(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Read during Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting Read")
	}
}

// A reset from the peer is an error of the read or write, naming it.
func TestSysConnPeerReset(t *testing.T) {
	sc, peer := tcpPair(t)
	if err := peer.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	peer.Close() // unread data and linger 0: RST
	time.Sleep(20 * time.Millisecond)
	_, err := sc.Read(make([]byte, 10))
	var op *net.OpError
	if !errors.As(err, &op) || !errors.Is(err, syscall.ECONNRESET) || op.Op != "read" {
		t.Fatalf("Read after the peer's reset: %v, want a read OpError with ECONNRESET", err)
	}
	var werr error
	for range 10 {
		if _, werr = sc.Write([]byte("more")); werr != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !errors.As(werr, &op) || op.Op != "write" {
		t.Fatalf("Write after the peer's reset: %v, want a write OpError", werr)
	}
}

// A socket some other holder made blocking (here File, whose Fd clears
// O_NONBLOCK on the shared file description) still never blocks a read
// or write: they wait in the poller, so deadlines end them.
func TestSysConnNeverBlocks(t *testing.T) {
	sc, peer := tcpPair(t)
	f, err := sc.tc.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_ = f.Fd() // makes the socket blocking
	if flags, err := fcntlFlags(f.Fd()); err != nil || flags&syscall.O_NONBLOCK != 0 {
		t.Fatalf("the socket is still non-blocking (flags %#x, %v): the test proves nothing", flags, err)
	}
	done := make(chan error, 2)
	go func() {
		_ = sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := sc.Read(make([]byte, 10))
		done <- err
	}()
	go func() {
		_ = sc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := sc.Write(make([]byte, 64<<20)) // the peer never reads
		done <- err
	}()
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("on a blocking socket: %v, want a deadline error", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a read or write blocked on a blocking socket")
		}
	}
	_ = peer
}

func fcntlFlags(fd uintptr) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
