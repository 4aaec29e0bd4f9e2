import DataProtection
import Foundation

/// Makes an agent-side backup one instant of the store (`Keys/agent-protocol.md` §4,
/// `backupCreate`): every request that changes the store (a file, a directory, a handle's
/// write, flush or close, an SQL statement, an item) runs inside ``mutating(_:)``; a backup
/// runs inside ``snapshot(waitingUpTo:_:)``, alone.
///
/// A backup that asks waits for the changes already running to end (at most its bound, else
/// `storeBusy`), and from the moment it asks no new change starts until it is done: changes
/// wait for the backup, at most its duration; reads never wait. One backup at a time.
final class AgentStoreGate: @unchecked Sendable {
    private let condition = NSCondition()
    /// Changes running now.
    private var changing = 0
    /// Backups asking or running (changes that arrive wait while this is above 0).
    private var snapshots = 0
    /// Whether a backup runs now.
    private var snapshotting = false

    /// Runs `body`, a change of the store, once no backup asks or runs.
    func mutating<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        condition.lock()
        while snapshots > 0 { condition.wait() }
        changing += 1
        condition.unlock()
        defer {
            condition.lock()
            changing -= 1
            condition.broadcast()
            condition.unlock()
        }
        return try body()
    }

    /// Runs `body`, a backup, with no change of the store running: waits up to `bound` for the
    /// changes running now to end (new ones wait from now on), else fails with `storeBusy`.
    func snapshot<R>(waitingUpTo bound: Duration, _ body: () throws(DataProtectionError) -> R) throws(DataProtectionError) -> R {
        let deadline = Date(timeIntervalSinceNow: Double(bound.components.seconds) + Double(bound.components.attoseconds) / 1e18)
        condition.lock()
        snapshots += 1
        while snapshotting || changing > 0 {
            if !condition.wait(until: deadline), snapshotting || changing > 0 {
                snapshots -= 1
                condition.broadcast()
                condition.unlock()
                throw DataProtectionError(.storeBusy, "Another client's change of the store ran for more than \(Int(bound.components.seconds)) s: no backup was made.",
                                          hint: "Try again once it has ended (a long write or SQL statement of another client).")
            }
        }
        snapshotting = true
        condition.unlock()
        defer {
            condition.lock()
            snapshotting = false
            snapshots -= 1
            condition.broadcast()
            condition.unlock()
        }
        return try body()
    }
}
