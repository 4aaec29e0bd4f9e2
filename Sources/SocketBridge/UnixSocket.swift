import CSocket
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A Unix-domain stream socket: listen, accept, connect, the peer's credentials,
/// and bytes with an optional file descriptor alongside (`SCM_RIGHTS`).
///
/// Owns its descriptor: ``close()`` (or deinit) closes it once. Sending and receiving
/// may happen on different threads at once (the kernel serialises each direction).
public final class UnixSocket: Sendable {
    private let state: Mutex<Int32>
    /// The descriptor (-1 once closed).
    public var descriptor: Int32 { state.withLock { $0 } }

    /// Takes ownership of `descriptor`.
    public init(adopting descriptor: Int32) {
        state = Mutex(descriptor)
    }

    deinit { close() }

    /// The longest socket path the system accepts.
    public static var pathLimit: Int { Int(dp_socket_path_limit()) }

    /// A socket listening at `path` (mode 0600). An existing file at `path` is the caller's to remove.
    public static func listen(at path: String, backlog: Int32 = 128) throws(SocketError) -> UnixSocket {
        let fd = dp_socket_listen(path, backlog)
        guard fd >= 0 else { throw SocketError("listen at \(path)", errno: -fd) }
        return UnixSocket(adopting: fd)
    }

    /// A socket connected to the listener at `path`.
    public static func connect(to path: String) throws(SocketError) -> UnixSocket {
        let fd = dp_socket_connect(path)
        guard fd >= 0 else { throw SocketError("connect to \(path)", errno: -fd) }
        return UnixSocket(adopting: fd)
    }

    /// A socket connected to the listener at `path`, waiting at most `milliseconds` for room
    /// in its queue (`EAGAIN` then: a listener that accepts nothing). Sends on the socket keep
    /// that limit: one that moves no byte for that long fails with `EAGAIN`.
    public static func connect(to path: String, within milliseconds: Int32) throws(SocketError) -> UnixSocket {
        let fd = dp_socket_connect_within(path, milliseconds)
        guard fd >= 0 else { throw SocketError("connect to \(path)", errno: -fd) }
        return UnixSocket(adopting: fd)
    }

    /// A listening socket inherited from the process that started this one (socket
    /// activation: systemd's `LISTEN_FDS`), checked to be a listening Unix-domain stream socket
    /// and made close-on-exec; with the path it is bound to (empty when it has none).
    public static func inheritedListener(_ descriptor: Int32) throws(SocketError) -> (socket: UnixSocket, path: String) {
        var path = [CChar](repeating: 0, count: 4096)
        let status = dp_socket_inherited_listener(descriptor, &path, path.count)
        guard status == 0 else { throw SocketError("the inherited descriptor \(descriptor) (a listening Unix-domain stream socket)", errno: -status) }
        let name = path.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return (UnixSocket(adopting: descriptor), name)
    }

    /// Two connected sockets (a bulk-data channel whose one end is passed to a peer).
    public static func pair() throws(SocketError) -> (UnixSocket, UnixSocket) {
        var pair: [Int32] = [-1, -1]
        let status = dp_socket_pair(&pair)
        guard status == 0 else { throw SocketError("socketpair", errno: -status) }
        return (UnixSocket(adopting: pair[0]), UnixSocket(adopting: pair[1]))
    }

    /// The next connection (blocks).
    public func accept() throws(SocketError) -> UnixSocket {
        let fd = dp_socket_accept(descriptor)
        guard fd >= 0 else { throw SocketError("accept", errno: -fd) }
        return UnixSocket(adopting: fd)
    }

    /// The peer's process, user and group, as the kernel recorded them when it connected.
    public func peerCredentials() throws(SocketError) -> (pid: Int32, uid: UInt32, gid: UInt32) {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        let status = dp_socket_peer(descriptor, &pid, &uid, &gid)
        guard status == 0 else { throw SocketError("SO_PEERCRED", errno: -status) }
        return (pid, uid, gid)
    }

    /// Sends every byte of `bytes`; `passing` (a descriptor the caller keeps and closes)
    /// travels with the first byte.
    public func send(_ bytes: UnsafeRawBufferPointer, passing: Int32? = nil) throws(SocketError) {
        var offset = 0
        var pass = passing ?? -1
        repeat {
            let sent = dp_socket_send(descriptor, bytes.baseAddress.map { $0 + offset }, bytes.count - offset, pass)
            guard sent >= 0 else { throw SocketError("send", errno: Int32(-sent)) }
            offset += sent
            pass = -1
        } while offset < bytes.count
    }

    /// Sends every byte of `bytes` (see ``send(_:passing:)-(UnsafeRawBufferPointer,_)``).
    public func send(_ bytes: some ContiguousBytes, passing: Int32? = nil) throws(SocketError) {
        var failure: SocketError?
        bytes.withUnsafeBytes { buffer in
            do throws(SocketError) { try send(buffer, passing: passing) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Receives into `buffer` from `offset` on (see ``receive(into:)-(UnsafeMutableRawBufferPointer)``).
    public func receive(into buffer: inout [UInt8], from offset: Int = 0) throws(SocketError) -> (count: Int, descriptor: Int32?) {
        var result: Result<(count: Int, descriptor: Int32?), SocketError> = .success((0, nil))
        buffer.withUnsafeMutableBytes { bytes in
            do throws(SocketError) { result = .success(try receive(into: UnsafeMutableRawBufferPointer(rebasing: bytes[offset...]))) } catch { result = .failure(error) }
        }
        return try result.get()
    }

    /// Receives up to `buffer.count` bytes (0: the peer closed its end) and the descriptor
    /// that came with them, if any (the caller owns it).
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(SocketError) -> (count: Int, descriptor: Int32?) {
        var received: Int32 = -1
        let count = dp_socket_receive(descriptor, buffer.baseAddress, buffer.count, &received)
        guard count >= 0 else {
            throw SocketError(count == -Int(EPROTO) ? "receive (more than one descriptor)" : "receive", errno: Int32(-count))
        }
        return (count, received >= 0 ? received : nil)
    }

    /// Whether the socket has something to read (or the peer hung up) within `milliseconds`.
    public func waitUntilReadable(milliseconds: Int32) throws(SocketError) -> Bool {
        let status = dp_socket_wait_readable(descriptor, milliseconds)
        guard status >= 0 else { throw SocketError("poll", errno: -status) }
        return status == 1
    }

    /// Whether `descriptor` (any socket, pipe or file, not only a ``UnixSocket``) has
    /// something to read, or its writer hung up, within `milliseconds`.
    public static func waitUntilReadable(descriptor: Int32, milliseconds: Int32) throws(SocketError) -> Bool {
        let status = dp_socket_wait_readable(descriptor, milliseconds)
        guard status >= 0 else { throw SocketError("poll", errno: -status) }
        return status == 1
    }

    /// Whether `descriptor` (any socket, pipe or file) takes a write within `milliseconds`
    /// (or has hung up or failed, which the write then reports). A pipe or Unix-domain
    /// socket found writable takes a write of up to 4096 bytes without blocking.
    public static func waitUntilWritable(descriptor: Int32, milliseconds: Int32) throws(SocketError) -> Bool {
        let status = dp_socket_wait_writable(descriptor, milliseconds)
        guard status >= 0 else { throw SocketError("poll", errno: -status) }
        return status == 1
    }

    /// Sets how long a send may move no byte before it fails with `EAGAIN` (`SO_SNDTIMEO`).
    public func setSendTimeout(milliseconds: Int32) throws(SocketError) {
        let status = dp_socket_set_send_timeout(descriptor, milliseconds)
        guard status == 0 else { throw SocketError("setsockopt(SO_SNDTIMEO)", errno: -status) }
    }

    /// Stops both directions at once, waking a thread blocked in ``accept()`` or a read
    /// (the descriptor stays open until ``close()``).
    public func shutdown() {
        let fd = descriptor
        if fd >= 0 { systemShutdown(fd) }
    }

    /// Ends this side's sending: the peer reads the end of the stream, and can still send
    /// what this side goes on reading.
    public func shutdownWriting() {
        let fd = descriptor
        if fd >= 0 { systemShutdownWriting(fd) }
    }

    /// Closes the descriptor (once).
    public func close() {
        let fd = state.withLock { fd in
            defer { fd = -1 }
            return fd
        }
        if fd >= 0 { systemClose(fd) }
    }

    /// Gives up ownership: the descriptor is the caller's to close.
    public func release() -> Int32 {
        state.withLock { fd in
            defer { fd = -1 }
            return fd
        }
    }
}

private func systemShutdown(_ fd: Int32) {
    _ = shutdown(fd, Int32(SHUT_RDWR))
}

private func systemShutdownWriting(_ fd: Int32) {
    _ = shutdown(fd, Int32(SHUT_WR))
}

private func systemClose(_ fd: Int32) {
    _ = close(fd)
}
