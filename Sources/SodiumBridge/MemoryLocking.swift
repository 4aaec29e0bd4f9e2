import CSodium
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Watches whether secure memory is really locked against swapping.
///
/// `sodium_malloc` locks each buffer with `mlock` and ignores a failure: past
/// `RLIMIT_MEMLOCK` (8 MiB on many Linux systems; unlimited with `CAP_IPC_LOCK`) secret keys
/// and cached plaintext silently become swappable. Every new ``SecureBytes`` is locked again
/// here (`sodium_mlock` of a range already locked costs nothing against the limit), until the
/// first failure: that one is reported, once per process, to the handler that
/// ``onFirstFailure(_:)`` installed (DataProtection's device logs it as a warning). A failure
/// before any handler is installed is delivered when one is.
package enum MemoryLocking {
    private struct State {
        var failed = false
        var delivered = false
        var message: String?
        var handler: (@Sendable (String) -> Void)?
    }

    private static let state = Locked(State())

    /// Installs the handler of the first failure, unless one is installed already; delivers a
    /// failure that happened before.
    package static func onFirstFailure(_ handler: @escaping @Sendable (String) -> Void) {
        let pending = state.withLock { state -> String? in
            guard state.handler == nil else { return nil }
            state.handler = handler
            guard state.failed, !state.delivered, let message = state.message else { return nil }
            state.delivered = true
            return message
        }
        if let pending { handler(pending) }
    }

    /// Whether a buffer could not be locked since the process started.
    package static var hasFailed: Bool { state.withLock { $0.failed } }

    /// Locks `count` bytes at `pointer` again (what `sodium_malloc` did, unchecked), as long as
    /// no failure was seen; reports the first failure.
    static func verify(_ pointer: UnsafeMutableRawPointer, count: Int) {
        guard !state.withLock({ $0.failed }) else { return }
        guard sodium_mlock(pointer, count) != 0 else { return }
        let reason = String(cString: strerror(errno))
        let message = "secure memory could not be locked against swapping (\(reason)): "
            + "RLIMIT_MEMLOCK is \(limitDescription()), and what DataProtection keeps beyond it (keys, "
            + "cached plaintext) may be written to swap. Raise the limit: `ulimit -l` in the shell, "
            + "LimitMEMLOCK= for a systemd service, a memlock line in /etc/security/limits.conf, "
            + "or --ulimit memlock=… for a container (see the README, Security)"
        let handler = state.withLock { state -> (@Sendable (String) -> Void)? in
            guard !state.failed else { return nil }
            state.failed = true
            state.message = message
            guard let handler = state.handler else { return nil }
            state.delivered = true
            return handler
        }
        handler?(message)
    }

    /// The soft limit, in bytes, as `getrlimit` reports it.
    private static func limitDescription() -> String {
        var limit = rlimit()
        #if canImport(Glibc)
        let resource = __rlimit_resource_t(__RLIMIT_MEMLOCK.rawValue)
        #else
        let resource = RLIMIT_MEMLOCK
        #endif
        guard getrlimit(resource, &limit) == 0 else { return "unknown" }
        return limit.rlim_cur == rlim_t.max ? "unlimited" : "\(limit.rlim_cur) bytes"
    }
}
