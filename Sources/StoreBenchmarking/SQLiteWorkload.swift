import DataProtection
import DataProtectionSQLite
import Foundation
import SQLiteBridge

/// The SQLite figures: the same Swift code (one ``SQLiteConnection``, statements prepared
/// per call) on a protected database through the store's VFS and on an ordinary file
/// through SQLite's own unix VFS, with the same pragmas (`synchronous=FULL`, the given
/// journal mode).
package struct SQLiteWorkload: Sendable {
    /// Rows inserted in transactions.
    package var transactionRows = 100_000
    /// Rows per transaction.
    package var rowsPerTransaction = 1_000
    /// Single-row autocommit inserts.
    package var autocommitRows = 10_000
    /// Point selects by primary key.
    package var selects = 100_000

    package init() {}

    /// What one side took for each part.
    package struct Times: Sendable {
        package var transactions: Duration = .zero
        package var autocommit: Duration = .zero
        package var selects: Duration = .zero

        package init(transactions: Duration = .zero, autocommit: Duration = .zero, selects: Duration = .zero) {
            self.transactions = transactions
            self.autocommit = autocommit
            self.selects = selects
        }
    }

    /// Runs every part on a connection opened by `open` (a new database), once.
    package func run(journalMode: String, _ open: () throws -> SQLiteConnection) throws -> Times {
        let connection = try open()
        defer { connection.close() }
        try prepare(connection, journalMode: journalMode)
        var times = Times()
        times.transactions = try insertInTransactions(connection, table: "kv")
        times.autocommit = try insertAutocommit(connection)
        times.selects = try selectPoints(connection)
        return times
    }

    /// Runs every part on both sides, alternating which goes first: the rows of the first
    /// round are kept for the autocommit inserts and the selects; the transactions of the
    /// later rounds go to a table dropped afterwards (its pages return to the free list,
    /// so the database does not grow round by round). Transactions and selects are the
    /// medians of `rounds` rounds; the autocommit inserts (each fsynced, minutes in all)
    /// run once per side.
    package func compare(
        journalMode: String, rounds: Int, protected: () throws -> SQLiteConnection, plain: () throws -> SQLiteConnection,
        progress: (String) -> Void = { _ in }
    ) throws -> (protected: Times, plain: Times) {
        let sides = [try protected(), try plain()]
        defer { for side in sides { side.close() } }
        for side in sides { try prepare(side, journalMode: journalMode) }
        var transactions: [[Duration]] = [[], []], selects: [[Duration]] = [[], []], autocommit: [Duration] = [.zero, .zero]
        for round in 0..<max(1, rounds) {
            for side in round % 2 == 0 ? [0, 1] : [1, 0] {
                progress("\(side == 0 ? "protected database" : "ordinary file"), round \(round + 1)")
                let connection = sides[side]
                if round == 0 {
                    transactions[side].append(try insertInTransactions(connection, table: "kv"))
                    autocommit[side] = try insertAutocommit(connection)
                } else {
                    transactions[side].append(try insertInTransactions(connection, table: "kv_round"))
                    try connection.execute("DROP TABLE kv_round")
                }
                selects[side].append(try selectPoints(connection))
            }
        }
        let times = (0..<2).map { side in
            Times(transactions: median(transactions[side]), autocommit: autocommit[side], selects: median(selects[side]))
        }
        return (times[0], times[1])
    }

    /// `synchronous=FULL` and the journal mode.
    private func prepare(_ connection: SQLiteConnection, journalMode: String) throws {
        try connection.execute("PRAGMA synchronous=FULL")
        let mode = try connection.query("PRAGMA journal_mode=\(journalMode)").first?.texts.first ?? nil
        guard mode == journalMode else { throw SQLiteError(code: 1, message: "journal mode \(mode ?? "none"), not \(journalMode)") }
    }

    /// The rows the transactions insert: whole transactions of ``rowsPerTransaction`` only.
    private var rowsInTransactions: Int { transactionRows / rowsPerTransaction * rowsPerTransaction }

    private static let value = SQLiteValue.blob(Data(repeating: 0xA5, count: 100))

    /// ``transactionRows`` inserts into `table` (created if missing), ``rowsPerTransaction`` per transaction.
    private func insertInTransactions(_ connection: SQLiteConnection, table: String) throws -> Duration {
        try connection.execute("CREATE TABLE IF NOT EXISTS \(table)(id INTEGER PRIMARY KEY, k TEXT NOT NULL, v BLOB NOT NULL)")
        var id: Int64 = 0
        return try measure {
            for _ in 0..<(transactionRows / rowsPerTransaction) {
                try connection.execute("BEGIN")
                for _ in 0..<rowsPerTransaction {
                    id += 1
                    try connection.execute("INSERT INTO \(table)(id, k, v) VALUES (?, ?, ?)", arguments: [.integer(id), .text("key \(id)"), Self.value])
                }
                try connection.execute("COMMIT")
            }
        }
    }

    /// ``autocommitRows`` single-row inserts into `kv`, after its transaction rows.
    private func insertAutocommit(_ connection: SQLiteConnection) throws -> Duration {
        var id = Int64(rowsInTransactions)
        return try measure {
            for _ in 0..<autocommitRows {
                id += 1
                try connection.execute("INSERT INTO kv(id, k, v) VALUES (?, ?, ?)", arguments: [.integer(id), .text("key \(id)"), Self.value])
            }
        }
    }

    /// ``selects`` point selects by primary key on `kv`, the same keys on every side and round.
    private func selectPoints(_ connection: SQLiteConnection) throws -> Duration {
        var state: UInt64 = 0x5EED
        let total = UInt64(rowsInTransactions + autocommitRows)
        return try measure {
            for _ in 0..<selects {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                let key = Int64((state >> 33) % total) + 1
                let rows = try connection.query("SELECT v FROM kv WHERE id = ?", arguments: [.integer(key)])
                guard rows.count == 1 else { throw SQLiteError(code: 1, message: "row \(key) missing") }
            }
        }
    }

    /// A connection to a new protected database at `path` in `store` (class `complete`).
    package static func protectedConnection(_ store: ProtectedStore, path: String) throws -> SQLiteConnection {
        let uri = try ProtectedDatabase.uri(forPath: path, in: store, protection: .complete)
        return try SQLiteConnection(filename: uri, vfs: nil, create: true)
    }

    /// A connection to a new ordinary database file at `url`.
    package static func plainConnection(_ url: URL) throws -> SQLiteConnection {
        try SQLiteConnection(filename: url.path, vfs: nil, create: true)
    }
}
