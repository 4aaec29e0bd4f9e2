import DataProtection

/// Tells a ``ProtectedDatabase`` when its class key is about to go (it rolls back and drops
/// its page cache) and when the device is erased (it closes). Registered to be called before
/// the store's own observer, so that the rollback still finds the database's files writable
/// with their keys. The device holds it weakly, the database strongly; it holds the database weakly.
final class DatabaseKeyDiscard: DeviceLifecycleObserver, Sendable {
    private weak let database: ProtectedDatabase?

    init(database: ProtectedDatabase) {
        self.database = database
    }

    func deviceWillDiscardKeys(of classes: Set<ProtectionClass>) {
        guard let database, classes.contains(database.protectionClass) else { return }
        database.keyWillBeDiscarded()
    }

    /// A restart closes the store's files; the connection's owner closes it (its next
    /// statement fails with `handleClosed`).
    func deviceWillRestart(flushing: Bool) {}

    func deviceWillErase() {
        database?.close()
    }
}
