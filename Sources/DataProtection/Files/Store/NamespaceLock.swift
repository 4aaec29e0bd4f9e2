import Foundation

/// The lock that serialises changes to a store's name space, and a memo of lookups that
/// stays valid while nothing holds it to change anything.
///
/// Every `locked` section may change what exists (creations, removals, moves, erases), so
/// taking and releasing the lock each count as a change: a lookup memoised before, or
/// while, such a section ran is not served after it. ``lookUp(_:resolve:)`` takes the lock
/// without counting, for questions that change nothing (`fileExists`): a database asks
/// whether its hot journal exists at the start of every read transaction, and answering
/// from the memo saves the name encryption and the `stat` of each path component.
///
/// Changes that bypass the store (another process writing the directory) are not seen;
/// one process owns a store at a time (the ownership lock), so only tampering does that,
/// and tampering is caught where contents are read.
final class NamespaceLock: NSLocking, @unchecked Sendable {
    private let base = NSRecursiveLock()
    /// Sections that may have changed the name space; guarded by `base`.
    private var changes: UInt64 = 0
    /// Kinds found at paths since `memoChanges`; guarded by `base`.
    private var memo: [String: ProtectedStore.Location.Kind] = [:]
    private var memoChanges: UInt64 = 0
    /// At most this many lookups are remembered (then the memo starts over).
    static let memoLimit = 256

    func lock() {
        base.lock()
        changes &+= 1
    }

    func unlock() {
        changes &+= 1
        base.unlock()
    }

    /// The kind of the entry at `path` (as the caller spelled it): remembered if nothing
    /// changed the name space since it was found, else from `resolve` (run holding the
    /// lock), remembered unless it throws.
    func lookUp(
        _ path: String, resolve: () throws(DataProtectionError) -> ProtectedStore.Location.Kind
    ) throws(DataProtectionError) -> ProtectedStore.Location.Kind {
        base.lock()
        defer { base.unlock() }
        if memoChanges != changes || memo.count >= Self.memoLimit {
            memo.removeAll(keepingCapacity: true)
            memoChanges = changes
        }
        if let known = memo[path] { return known }
        let kind = try resolve()
        memo[path] = kind
        return kind
    }

    /// Runs `body` holding the lock without counting a change, given the count of changes so
    /// far: for questions that change nothing (where an open file is now), whose answer may be
    /// remembered for as long as the count stays.
    func reading<R>(_ body: (UInt64) throws(DataProtectionError) -> R) throws(DataProtectionError) -> R {
        base.lock()
        defer { base.unlock() }
        return try body(changes)
    }
}
