#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A socket or process call that failed: the call, and `errno`.
public struct SocketError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was being done ("connect to /run/user/1000/dpctl/….sock").
    public let operation: String
    /// The `errno` value.
    public let errno: Int32

    /// A failed call and its `errno`.
    public init(_ operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }

    /// The peer is gone (EPIPE, ECONNRESET) or was never there (ENOENT, ECONNREFUSED).
    public var isDisconnection: Bool {
        [EPIPE, ECONNRESET, ENOENT, ECONNREFUSED, ENOTCONN].contains(errno)
    }

    public var description: String { "\(operation): \(String(cString: strerror(errno)))" }
}
