import DataProtection
import Dispatch
import Foundation
import GRDB
import SQLiteBridge
import Synchronization

/// The connections of one GRDB queue or pool on a protected database, held to the contract
/// of a protected database at a key discard and an erase:
///
/// - When the class key is about to go, every connection's statement gate closes (no
///   statement runs any more, not even one SQLite could answer from its cache or without the
///   file: `SELECT 1`, `COMMIT`), then the writer's open transaction is rolled back and its
///   page cache freed (wiped) while the key is still present: the writer's queue is held
///   for it (up to 2 s; a statement running longer is interrupted by the closed gate, and the
///   rollback runs as soon as the queue is free). The gates open again once the key is back
///   and no rollback is owed.
/// - Erase closes the gates for good: the connections answer nothing again.
///
/// Kept alive by the gates (so by the connections), held weakly by the device.
final class ProtectedConnections: DeviceLifecycleObserver, Sendable {
    private struct Gate {
        weak var gate: SQLiteStatementGate?
        let isWriter: Bool
    }

    private struct State {
        var gates: [Gate] = []
        weak var writer: (any DatabaseWriter)?
        /// The class of the database, once known (after the first connection opened it).
        var protectionClass: ProtectionClass?
        /// A rollback the writer's queue was too busy to let run before the key went.
        var rollbackOwed = false
        var erased = false
    }

    private let device: Device
    private let store: ProtectedStore
    private let path: String
    private let state = Mutex(State())
    private let availability = Mutex<DeviceObservation?>(nil)

    init(store: ProtectedStore, path: String) {
        self.store = store
        self.device = store.device
        self.path = path
    }

    /// Adds to `configuration` a preparation that gives each connection GRDB opens its gate
    /// (after the caller's own preparations, before any access).
    func guarding(_ configuration: Configuration) -> Configuration {
        var configuration = configuration
        configuration.prepareDatabase { [self] db in try guardConnection(db) }
        return configuration
    }

    private func guardConnection(_ db: Database) throws {
        let busyTimeout: Int32? = switch db.configuration.busyMode {
        case .immediateError: 0
        case let .timeout(seconds): Int32(clamping: Int((seconds * 1000).rounded(.up)))
        case .callback: nil
        }
        guard let connection = db.sqliteConnection, let gate = SQLiteStatementGate.install(on: connection, busyTimeout: busyTimeout) else {
            throw DataProtectionError(.ioFailure, "Cannot watch a SQLite connection of \(path) for the device's lock.")
        }
        gate.keep(self)
        let refusal: SQLiteStatementGate.State = state.withLock { state in
            state.gates.removeAll { $0.gate == nil }
            state.gates.append(Gate(gate: gate, isWriter: !db.configuration.readonly))
            if state.erased { return .erased }
            if state.rollbackOwed { return .keyAway }
            return .open
        }
        gate.set(refusal)
    }

    /// Starts watching the device, once the queue or pool exists.
    func start(writer: any DatabaseWriter) throws(DataProtectionError) {
        let protectionClass = try store.attributesOfItem(atPath: path).protectionClass ?? .completeUntilFirstUserAuthentication
        state.withLock { state in
            state.writer = writer
            state.protectionClass = protectionClass
        }
        device.addLifecycleObserver(self, first: true)
        let observation = device.addObserver { [weak self] notification in
            guard notification == .protectedDataDidBecomeAvailable else { return }
            self?.reopenIfAvailable()
        }
        availability.withLock { $0 = observation }
    }

    deinit {
        availability.withLock { $0?.cancel() }
    }

    // MARK: - DeviceLifecycleObserver

    func deviceWillDiscardKeys(of classes: Set<ProtectionClass>) {
        let (gates, writer): ([Gate], (any DatabaseWriter)?) = state.withLock { state in
            guard let protectionClass = state.protectionClass, classes.contains(protectionClass),
                  protectionClass == .complete || protectionClass == .completeWhenUserInactive else { return ([], nil) }
            return (state.gates, state.writer)
        }
        guard !gates.isEmpty else { return }
        // First, nothing more runs: a statement running now stops at its next step.
        for gate in gates { gate.gate?.set(.keyAway) }
        let writers = gates.filter(\.isWriter).compactMap(\.gate)
        guard let writer, !writers.isEmpty else { return }
        // Then the writer's transaction goes, with its files still readable: hold the writer's
        // queue (its connection is idle while the handoff waits) and roll back on this thread,
        // which holds the device's transition (the files need it to still have their key).
        let handoff = QueueHandoff()
        state.withLock { $0.rollbackOwed = true }
        writer.asyncWriteWithoutTransaction { [self] _ in
            if handoff.arrive() { return }
            // The discard did not wait: the rollback is owed, made now on the writer's queue.
            for gate in writers { gate.rollBackAndReleaseMemory() }
            state.withLock { $0.rollbackOwed = false }
            reopenIfAvailable()
        }
        if handoff.waitForArrival(within: .seconds(2)) {
            for gate in writers { gate.rollBackAndReleaseMemory() }
            state.withLock { $0.rollbackOwed = false }
            handoff.release()
        }
    }

    func deviceWillRestart(flushing: Bool) {}

    func deviceWillErase() {
        let gates = state.withLock { state in
            state.erased = true
            return state.gates
        }
        for gate in gates { gate.gate?.set(.erased) }
    }

    func deviceDidErase() {}

    /// Opens the gates closed for a key discard once the key is back and nothing is owed.
    private func reopenIfAvailable() {
        let (protectionClass, gates): (ProtectionClass?, [Gate]) = state.withLock { state in
            guard !state.erased, !state.rollbackOwed else { return (nil, []) }
            return (state.protectionClass, state.gates)
        }
        guard let protectionClass, device.isAvailable(protectionClass) else { return }
        for gate in gates where gate.gate?.state == .keyAway { gate.gate?.set(.open) }
    }
}

/// A meeting between a thread that waits (a bounded time) for a block to start on another
/// queue, and that block, which then waits until the first thread releases it. If the first
/// thread gave up, the block learns it and does not wait.
private final class QueueHandoff: Sendable {
    private enum Phase { case waiting, arrived, gaveUp }
    private let phase = Mutex(Phase.waiting)
    private let arrival = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)

    /// Called by the block: `true` when the waiting thread took the handoff (the block has
    /// waited for its release); `false` when it had given up.
    func arrive() -> Bool {
        let taken = phase.withLock { phase -> Bool in
            guard phase == .waiting else { return false }
            phase = .arrived
            return true
        }
        guard taken else { return false }
        arrival.signal()
        released.wait()
        return true
    }

    /// Whether the block arrived within `timeout`; if not, the handoff is given up.
    func waitForArrival(within timeout: Duration) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let deadline = DispatchTime.now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
        if arrival.wait(timeout: deadline) == .success { return true }
        let arrivedJustNow = phase.withLock { phase -> Bool in
            guard phase == .waiting else { return true }
            phase = .gaveUp
            return false
        }
        if arrivedJustNow { arrival.wait() }  // it has signalled, or is about to
        return arrivedJustNow
    }

    /// Lets the block go on.
    func release() {
        released.signal()
    }
}
