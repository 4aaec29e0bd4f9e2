import Foundation

extension NSLocking {
    /// Runs `body` holding the lock, preserving `body`'s typed error
    /// (Foundation's `withLock` rethrows untyped errors only).
    func locked<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}
