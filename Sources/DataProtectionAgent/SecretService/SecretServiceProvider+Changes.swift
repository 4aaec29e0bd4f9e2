import DBusBridge
import DataProtection
import DataProtectionSQLite
import Foundation

/// The collection's change signals for every change of the keychain, whoever made it: a
/// Secret Service client, a client of the agent's socket (`dpctl item`, `AgentStore.keychain`)
/// or the library in the agent's process. Changes made by Secret Service clients are
/// announced by the method that made them; every other change is found by comparing the
/// readable items with those last announced, at each change the keychain reports
/// (``Keychain/changes()``).
extension SecretServiceProvider {
    /// What was last announced of an item: its accessibility and modification date
    /// (milliseconds). Every change of an item moves its modification date, so a new date is a
    /// change (two changes by other clients than Secret Service ones within one millisecond are
    /// one `ItemChanged`).
    struct Announced: Equatable {
        var accessibility: ItemAccessibility
        var modified: Int64

        init(_ item: KeychainItem) {
            accessibility = item.accessibility
            modified = Int64((item.modificationDate.timeIntervalSince1970 * 1000).rounded())
        }

        init(accessibility: ItemAccessibility, modified: Int64) {
            self.accessibility = accessibility
            self.modified = modified
        }
    }

    /// Starts following the keychain's changes (from the items readable now).
    func followChanges() {
        let changes = keychain.changes()
        announceLock.withLock {
            let stamps = (try? keychain.itemStamps().stamps) ?? [:]
            state.withLock { state in
                for (id, stamp) in stamps { state.announced[id] = Announced(accessibility: stamp.accessibility, modified: stamp.modified) }
            }
        }
        let task = Task.detached { [weak self] in
            // One comparison covers every change made before it: a burst of changes (the
            // generations queued meanwhile) costs one listing of the items, not one each.
            var compared: UInt64 = 0
            for await generation in changes {
                guard let self else { return }
                guard generation > compared else { continue }
                compared = self.keychain.generation
                self.announceChanges()
            }
        }
        state.withLock { $0.following = task }
    }

    /// Runs `change` (a Secret Service client's change, which replies to the client) and
    /// announces it with the signals it returns (member, item identifier, the item as it now
    /// is or `nil` when deleted), as one step: the comparison with the keychain cannot see the
    /// change before `change` recorded it, and announce it twice.
    func announcing(_ change: () throws(DBusError) -> [ItemSignal]) throws(DBusError) {
        announceLock.lock()
        defer { announceLock.unlock() }
        // In the agent, a change waits for a backup being made (one instant of the store).
        let signals: [ItemSignal]
        if let gate = state.withLock({ $0.storeGate }) {
            signals = try gate.mutating(change)
        } else {
            signals = try change()
        }
        state.withLock { state in
            for signal in signals {
                if let item = signal.item { state.announced[signal.id] = Announced(item) } else { state.announced.removeValue(forKey: signal.id) }
            }
        }
        for signal in signals { emitItemSignal(signal.member, id: signal.id) }
    }

    /// A change signal to emit: its member, the item, and the item as it now is (`nil`: deleted).
    typealias ItemSignal = (member: String, id: String, item: KeychainItem?)

    /// Compares the readable items with those last announced and emits `ItemCreated`,
    /// `ItemChanged` and `ItemDeleted` for the differences. An item of a locked class is
    /// neither created nor deleted by the comparison (it cannot be read, nor changed).
    func announceChanges() {
        // Emitted after the lock is released: a method handler on the bus's owner thread may
        // be waiting for it, and an emission from this thread waits for the owner thread.
        let signals = announceLock.withLock { () -> [(String, String)] in
            guard let search = try? keychain.itemStamps() else { return [] }
            var signals: [(String, String)] = []
            state.withLock { state in
                for (id, stamp) in search.stamps {
                    let now = Announced(accessibility: stamp.accessibility, modified: stamp.modified)
                    state.accessibilities[id] = stamp.accessibility
                    switch state.announced[id] {
                    case nil: signals.append(("ItemCreated", id))
                    case let before? where before != now: signals.append(("ItemChanged", id))
                    default: break
                    }
                    state.announced[id] = now
                }
                for (id, before) in state.announced where search.stamps[id] == nil && !search.locked.contains(before.accessibility) {
                    state.announced.removeValue(forKey: id)
                    state.accessibilities.removeValue(forKey: id)
                    signals.append(("ItemDeleted", id))
                }
            }
            return signals.sorted { ($0.0 == "ItemDeleted" ? 0 : 1, $0.1) < ($1.0 == "ItemDeleted" ? 0 : 1, $1.1) }
        }
        for (member, id) in signals { emitItemSignal(member, id: id) }
    }

    /// Emits the collection's signal `member` (`ItemCreated`, `ItemChanged`, `ItemDeleted`) for item `id`.
    func emitItemSignal(_ member: String, id: String) {
        try? connection.emitSignal(path: Self.collectionPath, interface: "org.freedesktop.Secret.Collection", member: member,
                                   [.objectPath(Self.itemPath(id))])
    }
}
