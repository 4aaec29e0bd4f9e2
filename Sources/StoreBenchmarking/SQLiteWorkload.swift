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
    }

    /// Runs every part on a connection opened by `open` (a new database).
    package func run(journalMode: String, _ open: () throws -> SQLiteConnection) throws -> Times {
        let connection = try open()
        defer { connection.close() }
        try connection.execute("PRAGMA synchronous=FULL")
        let mode = try connection.query("PRAGMA journal_mode=\(journalMode)").first?.texts.first ?? nil
        guard mode == journalMode else { throw SQLiteError(code: 1, message: "journal mode \(mode ?? "none"), not \(journalMode)") }
        try connection.execute("CREATE TABLE kv(id INTEGER PRIMARY KEY, k TEXT NOT NULL, v BLOB NOT NULL)")
        let value = SQLiteValue.blob(Data(repeating: 0xA5, count: 100))
        var times = Times()
        var id: Int64 = 0
        times.transactions = try measure {
            for _ in 0..<(transactionRows / rowsPerTransaction) {
                try connection.execute("BEGIN")
                for _ in 0..<rowsPerTransaction {
                    id += 1
                    try connection.execute("INSERT INTO kv(id, k, v) VALUES (?, ?, ?)", arguments: [.integer(id), .text("key \(id)"), value])
                }
                try connection.execute("COMMIT")
            }
        }
        times.autocommit = try measure {
            for _ in 0..<autocommitRows {
                id += 1
                try connection.execute("INSERT INTO kv(id, k, v) VALUES (?, ?, ?)", arguments: [.integer(id), .text("key \(id)"), value])
            }
        }
        var state: UInt64 = 0x5EED
        let total = UInt64(id)
        times.selects = try measure {
            for _ in 0..<selects {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                let key = Int64((state >> 33) % total) + 1
                let rows = try connection.query("SELECT v FROM kv WHERE id = ?", arguments: [.integer(key)])
                guard rows.count == 1 else { throw SQLiteError(code: 1, message: "row \(key) missing") }
            }
        }
        return times
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
