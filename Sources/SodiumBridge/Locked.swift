import Foundation

/// A value that only the holder of its lock can reach: the one lock type of the package,
/// in place of `Synchronization.Mutex` (same call shape: `Locked(0)`,
/// `count.withLock { $0 += 1 }`; `body`'s typed error passes through unchanged).
///
/// Why not `Mutex`: ThreadSanitizer must see the lock. On Linux `Mutex` locks with raw
/// `futex` system calls, which TSan does not intercept, so TSan saw no happens-before edge
/// between two critical sections and reported every value a `Mutex` guarded as a data race
/// (44 false reports, README "Security"). `Locked` holds an `NSLock`, which is a
/// `pthread_mutex_t` underneath, and TSan intercepts `pthread_mutex_lock`/`unlock`.
///
/// Why `NSLock` rather than a `pthread_mutex_t` of our own: a pthread mutex must never move,
/// so it would live in memory allocated through an unsafe pointer; `NSLock` already does
/// that inside Foundation, and this type needs no unsafe code at all. It lives in
/// SodiumBridge only because that is the lowest module: every other one, and
/// ``SecretRecorder`` here, uses the same type.
///
/// Not reentrant: calling `withLock` again from within `body` deadlocks.
package final class Locked<Value: ~Copyable>: @unchecked Sendable {
    private let lock = NSLock()
    /// Reached only with `lock` held, so no two accesses can overlap: Swift's dynamic
    /// exclusivity check (a thread-local access set, two runtime calls per `withLock`) would
    /// never fire, and costs more than the lock itself on a SQLite commit's dozens of calls.
    @exclusivity(unchecked) private var value: Value

    /// A lock guarding `initialValue`.
    package init(_ initialValue: consuming sending Value) {
        value = initialValue
    }

    /// Runs `body` with exclusive access to the value, holding the lock.
    package func withLock<R: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending R
    ) throws(E) -> sending R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

extension NSLocking {
    /// Runs `body` holding the lock, preserving `body`'s typed error
    /// (Foundation's `withLock` rethrows untyped errors only). For state an object guards
    /// with a lock of its own; a single guarded value is a ``Locked``.
    package func locked<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}
