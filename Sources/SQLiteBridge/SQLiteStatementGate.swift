import CSQLite
import SodiumBridge

/// A gate on one SQLite connection that a library other than this package opened and runs
/// (GRDB's queues and pools): closed, SQLite runs no statement on it but a `ROLLBACK`, not
/// even one it could answer from its caches or without the file (`SELECT 1`, a cached page,
/// `COMMIT`); each fails with `SQLITE_INTERRUPT`.
///
/// It is SQLite's progress handler, called at every step of every statement (open, one atomic
/// load: some 3.6 % more instructions on an in-memory workload with no I/O, measured with
/// callgrind; nothing next to the encryption of a protected database). The connection owns the
/// gate: it lives until the connection closes (a function registered with it releases it).
/// Install it on the thread that owns the connection; open and close it from any thread.
package final class SQLiteStatementGate: @unchecked Sendable {
    /// Why a gate refuses.
    package enum State: Int32, Sendable {
        case open = 0
        /// The class key of the database is away (the device locked).
        case keyAway = 1
        /// The device was erased: the connection answers nothing again.
        case erased = 2
    }

    /// Read by the progress handler on the connection's thread; written atomically.
    private let gate: UnsafeMutablePointer<DPStatementGate>
    /// The connection's address, until it closes (then 0).
    private let connection: Locked<Int>
    /// The connection's busy timeout in milliseconds (`nil`: a busy handler of its owner's,
    /// left alone), set back after the scratch page is overwritten.
    private let busyTimeout: Int32?
    /// What the gate keeps alive as long as the connection is open (whoever opens and closes it).
    private let kept = Locked<(any AnyObject & Sendable)?>(nil)

    /// Keeps `object` alive until the connection closes.
    package func keep(_ object: any AnyObject & Sendable) {
        kept.withLock { $0 = object }
    }

    private init(connection: OpaquePointer, busyTimeout: Int32?) {
        self.busyTimeout = busyTimeout
        gate = .allocate(capacity: 1)
        gate.initialize(to: DPStatementGate(state: 0, connection: connection))
        self.connection = Locked(Int(bitPattern: connection))
    }

    deinit {
        gate.deinitialize(count: 1)
        gate.deallocate()
    }

    /// Installs a gate, open, on `connection` (an `sqlite3 *`), on the thread that uses it.
    /// `busyTimeout`: the connection's busy timeout in milliseconds (0: none), or `nil` when
    /// its owner installed a busy handler of its own. `nil` when SQLite refuses the function
    /// that ties the gate's life to the connection.
    package static func install(on connection: OpaquePointer, busyTimeout: Int32?) -> SQLiteStatementGate? {
        let gate = SQLiteStatementGate(connection: connection, busyTimeout: busyTimeout)
        let retained = Unmanaged.passRetained(gate).toOpaque()
        // A function that does nothing, whose destructor SQLite calls when the connection
        // closes (or the function is replaced): the gate's last reference goes then.
        let status = sqlite3_create_function_v2(
            connection, "dataprotection_statement_gate", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY, retained,
            { context, _, _ in sqlite3_result_null(context) }, nil, nil,
            { pointer in
                guard let pointer else { return }
                let gate = Unmanaged<SQLiteStatementGate>.fromOpaque(pointer)
                gate.takeUnretainedValue().disconnect()
                gate.release()
            })
        guard status == SQLITE_OK else {
            // SQLite called the destructor on failure: the retained reference is gone.
            return nil
        }
        dp_gate_install(gate.gate)
        return gate
    }

    /// Why the gate refuses now (`open`: it does not).
    package var state: State {
        State(rawValue: dp_gate_state(gate)) ?? .keyAway
    }

    /// Opens or closes the gate: from the next step of the statement running now.
    package func set(_ newState: State) {
        Self.closedGates.withLock { closed in
            let old = state
            guard old != newState else { return }
            if old != .open { closed[old, default: 0] -= 1 }
            if newState != .open { closed[newState, default: 0] += 1 }
            dp_gate_set_state(gate, newState.rawValue)
        }
    }

    /// The number of closed gates of connections still open in this process, by reason.
    private static let closedGates = Locked<[State: Int]>([:])

    /// Why some gate of this process refuses now: `erased` before `keyAway`; `nil` when every
    /// gate is open. An `SQLITE_INTERRUPT` that a caller did not ask for is a gate's refusal
    /// while this is not `nil`.
    package static var refusal: State? {
        closedGates.withLock { closed in
            if closed[.erased, default: 0] > 0 { return .erased }
            return closed[.keyAway, default: 0] > 0 ? .keyAway : nil
        }
    }

    /// The connection closed: its gate counts no more.
    private func disconnect() {
        set(.open)
        connection.withLock { $0 = 0 }
        kept.withLock { $0 = nil }
    }

    /// Whether the connection is still open.
    package var isConnected: Bool { connection.withLock { $0 != 0 } }

    /// Rolls back the connection's open transaction, overwrites the last record SQLite
    /// assembled (``SQLiteInsertScratch``) and frees (wipes) every page SQLite caches for it.
    /// Call it only while nothing else uses the connection (its owner's queue held) and the
    /// key is still there: the gate lets the `ROLLBACK` through whatever its state.
    package func rollBackAndReleaseMemory() {
        connection.withLock { address in
            guard let connection = OpaquePointer(bitPattern: address) else { return }
            if sqlite3_get_autocommit(connection) == 0 {
                _ = sqlite3_exec(connection, "ROLLBACK", nil, nil, nil)
            }
            // The last record written stays in SQLite's insert scratch page: overwritten by a
            // transaction the gate would refuse, so without the gate for that moment.
            sqlite3_progress_handler(connection, 0, nil, nil)
            SQLiteInsertScratch.scrub(connection, busyTimeout: busyTimeout)
            dp_gate_install(gate)
            _ = sqlite3_db_release_memory(connection)
        }
    }

    /// Whether the connection is inside a transaction (`false` once closed). Same rule as
    /// ``rollBackAndReleaseMemory()``.
    package var isInTransaction: Bool {
        connection.withLock { address in OpaquePointer(bitPattern: address).map { sqlite3_get_autocommit($0) == 0 } ?? false }
    }
}
