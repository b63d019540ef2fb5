//go:build linux && (amd64 || arm64)

package unarygrpc

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// sysConn is a TCP connection whose reads and writes skip the Go
// runtime's bookkeeping for system calls that may block.
//
// Through net.TCPConn each read(2) and write(2) goes through
// syscall.Syscall, which tells the scheduler the call may block. When the
// process was idle just before, as serve is between two of the
// autoscaler's calls, that wakes the runtime's monitor thread (sysmon)
// from its sleep; the monitor sleeps 20 µs, finds the process idle again
// and goes back to sleep: two context switches and three more system
// calls on every call, over a quarter of serve's CPU in the autoscaler's
// loop. sysConn makes its calls with syscall.RawSyscall6, which does not
// tell the scheduler, and that is safe only for a call that cannot block:
// recvfrom(2) and sendto(2) with MSG_DONTWAIT never block, whatever the
// socket's own flags say (another process sharing it, or File, may have
// made it blocking). MSG_NOSIGNAL keeps a write to a reset connection from
// raising SIGPIPE. On EAGAIN the goroutine waits in the runtime's network
// poller as net.TCPConn does, so deadlines and Close work as they do
// there.
//
// The cost of not waking the monitor: while it sleeps on, it does not
// preempt a goroutine that runs for over 10 ms, so on one processor
// (serve's default) a long stretch of work started by a call delays the
// process's other goroutines until it blocks or ends, rather than for
// 10 ms at a time. The calls run on the reader answer from memory (the
// longest, NodeGroupNodes of 5,000 servers, takes a few milliseconds);
// the others make ordinary system calls (the Hetzner API, logging), which
// wake the monitor, as do garbage collections and the expiry of a timer
// that was pending when it went to sleep.
type sysConn struct {
	tc *net.TCPConn
	rc syscall.RawConn

	rmu     sync.Mutex // guards the read state
	rbuf    []byte
	rn      int
	rerr    syscall.Errno
	readFn  func(fd uintptr) bool
	wmu     sync.Mutex // guards the write state
	wbuf    []byte
	wn      int
	werr    syscall.Errno
	writeFn func(fd uintptr) bool
}

// maxRW is the most one read or write asks of the kernel, as in the
// standard library.
const maxRW = 1 << 30

// fastIO returns c with reads and writes that skip the scheduler's
// system-call bookkeeping, or c itself when it is not a TCP connection or
// the build is instrumented: the race detector, for one, learns from the
// standard library's reads and writes that what one goroutine did before
// writing happened before what another does after reading those bytes,
// and would report such code as racing over system calls it does not see.
func fastIO(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok || instrumented {
		return c
	}
	if sc, err := newSysConn(tc); err == nil {
		return sc
	}
	return c
}

func newSysConn(tc *net.TCPConn) (*sysConn, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	sc := &sysConn{tc: tc, rc: rc}
	sc.readFn = sc.read
	sc.writeFn = sc.write
	return sc, nil
}

// Read reads into p, waiting in the network poller while nothing is there.
func (c *sysConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(p) > maxRW {
		p = p[:maxRW]
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rbuf, c.rn, c.rerr = p, 0, 0
	err := c.rc.Read(c.readFn)
	c.rbuf = nil
	switch {
	case err != nil:
		return 0, err
	case c.rerr != 0:
		return 0, c.opError("read", c.rerr)
	case c.rn == 0:
		return 0, io.EOF
	}
	return c.rn, nil
}

// read is the read attempt of Read; false asks the poller to wait.
func (c *sysConn) read(fd uintptr) bool {
	var done bool
	c.rn, c.rerr, done = attempt(syscall.SYS_RECVFROM, fd, c.rbuf, syscall.MSG_DONTWAIT)
	return done
}

// Write writes all of p, waiting in the network poller while the socket's
// buffer is full.
func (c *sysConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	written := 0
	for written < len(p) {
		chunk := p[written:]
		if len(chunk) > maxRW {
			chunk = chunk[:maxRW]
		}
		c.wbuf, c.wn, c.werr = chunk, 0, 0
		err := c.rc.Write(c.writeFn)
		c.wbuf = nil
		written += c.wn
		switch {
		case err != nil:
			return written, err
		case c.werr != 0:
			return written, c.opError("write", c.werr)
		case c.wn == 0:
			return written, io.ErrShortWrite
		}
	}
	return written, nil
}

// write is the write attempt of Write; false asks the poller to wait.
func (c *sysConn) write(fd uintptr) bool {
	var done bool
	c.wn, c.werr, done = attempt(syscall.SYS_SENDTO, fd, c.wbuf, syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL)
	return done
}

// attempt makes one recvfrom or sendto (trap) of b on fd with flags,
// again after EINTR: its count or error, or done false for EAGAIN.
func attempt(trap, fd uintptr, b []byte, flags uintptr) (n int, errno syscall.Errno, done bool) {
	for {
		r, _, e := syscall.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), flags, 0, 0)
		switch e {
		case 0:
			return int(r), 0, true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, 0, false
		}
		return 0, e, true
	}
}

func (c *sysConn) opError(op string, e syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, e)}
}

// The rest is the TCP connection's own. Not embedding it keeps its
// ReadFrom and WriteTo, which would go around Read and Write, out of reach.

func (c *sysConn) Close() error                       { return c.tc.Close() }
func (c *sysConn) CloseWrite() error                  { return c.tc.CloseWrite() }
func (c *sysConn) LocalAddr() net.Addr                { return c.tc.LocalAddr() }
func (c *sysConn) RemoteAddr() net.Addr               { return c.tc.RemoteAddr() }
func (c *sysConn) SetDeadline(t time.Time) error      { return c.tc.SetDeadline(t) }
func (c *sysConn) SetReadDeadline(t time.Time) error  { return c.tc.SetReadDeadline(t) }
func (c *sysConn) SetWriteDeadline(t time.Time) error { return c.tc.SetWriteDeadline(t) }
