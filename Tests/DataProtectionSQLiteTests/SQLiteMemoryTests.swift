import DataProtection
import DataProtectionSQLite
import SQLiteBridge
import SodiumBridge
import Foundation
import Testing

/// SQLite's own memory (page cache, rows, statements) is wiped when SQLite frees it.
@Suite struct SQLiteMemoryTests {
    @Test("every block SQLite frees is wiped first: the page cache of a closed database leaves no plaintext behind")
    func freedMemoryIsWiped() throws {
        try withDatabaseStore { fixture in
            #expect(SQLiteConnection.freedMemoryIsWiped, "the zeroing allocator is installed before SQLite initialises")
            SQLiteFreedMemoryAudit.start()
            let db = try ProtectedDatabase(atPath: "m.db", in: fixture.store, create: true, protection: .complete)
            try db.execute("CREATE TABLE t(x TEXT); WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 500) INSERT INTO t SELECT 'needle-' || n FROM c")
            #expect(try db.query("SELECT count(*) FROM t WHERE x LIKE 'needle-%'").first?.values == [.integer(500)])
            db.close()
            let audit = SQLiteFreedMemoryAudit.stop()
            #expect(audit.blocks > 100, "the connection's memory went back: \(audit.blocks) blocks")
            #expect(audit.unwiped == 0, "\(audit.unwiped) of \(audit.blocks) blocks freed unwiped")
        }
    }
}

extension SQLiteMemoryTests {
    @Test("the page cache of an open connection is released when the device locks")
    func pageCacheGoesAtTheLock() throws {
        try withDatabaseStore { fixture in
            let db = try ProtectedDatabase(atPath: "c.db", in: fixture.store, create: true, protection: .complete)
            try db.execute("CREATE TABLE t(x TEXT); WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 2000) INSERT INTO t SELECT 'needle-' || n FROM c")
            #expect(try db.query("SELECT count(*) FROM t WHERE x LIKE 'needle-%'").first?.values == [.integer(2000)])
            let cached = db.cachedBytes
            #expect(cached > 20_000, "pages cached: \(cached) bytes")
            try fixture.device.lock()
            let deadline = Date().addingTimeInterval(10)
            while db.cachedBytes >= cached / 4, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            #expect(db.cachedBytes < cached / 4, "after the lock: \(db.cachedBytes) of \(cached) bytes still cached")
            try fixture.unlock()
            #expect(try db.query("SELECT count(*) FROM t").first?.values == [.integer(2000)], "read again from the store")
            db.close()
        }
    }
}

/// What the discard of a database's class key leaves in the process: nothing of its rows.
@Suite("SQLite memory at the key discard", .serialized, .enabled(if: ProcessInfo.processInfo.environment["DP_SANITIZER"] == nil,
                                                                  "the sanitizers' shadow memory is terabytes of readable reservations"))
struct SQLiteKeyDiscardMemoryTests {
    /// The text of row `number`, as the SQL below makes it inside SQLite: `QZJ<seed>-<number, 5 digits>-JZQ`.
    /// Built here in secure memory and recorded masked, so that the test holds no copy of it.
    static func rowNeedle(seed: String, number: Int, label: String) -> SecretRecorder.Secret {
        let text = SecureBytes(count: 3 + seed.utf8.count + 7 + 3) { out in
            var index = 0
            func put(_ bytes: some Sequence<UInt8>) { for byte in bytes { out[index] = byte; index += 1 } }
            put("QZJ".utf8)
            put(seed.utf8)
            put([UInt8(ascii: "-")])
            var digits = [UInt8](repeating: UInt8(ascii: "0"), count: 5)
            var rest = number
            for position in stride(from: 4, through: 0, by: -1) {
                digits[position] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            }
            put(digits)
            put("-JZQ".utf8)
        }
        defer { text.wipe() }
        return text.withUnsafeBytes { SecretRecorder.Secret(label: "\(label) row \(number)", bytes: $0) }
    }

    @Test("a complete database with a transaction open at the lock: after the discard none of its rows, committed or not, is in memory")
    func noRowsAfterTheDiscard() throws {
        #if os(Linux)
        try withDatabaseStore { fixture in
            let seed = String(UInt64.random(in: 1 << 60..<UInt64.max), radix: 36)
            let row = "'QZJ' || '\(seed)' || printf('-%05d-', n) || 'JZQ'"
            let db = try ProtectedDatabase(atPath: "rows.db", in: fixture.store, create: true, protection: .complete)
            try db.execute("CREATE TABLE t(x TEXT)")
            try db.execute("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 2000) INSERT INTO t SELECT \(row) FROM c")
            try db.execute("BEGIN")
            try db.execute("WITH RECURSIVE c(n) AS (SELECT 2001 UNION ALL SELECT n + 1 FROM c WHERE n < 4000) INSERT INTO t SELECT \(row) FROM c")
            #expect(try db.query("SELECT count(*) FROM t WHERE x LIKE 'QZJ%JZQ'").first?.values == [.integer(4000)])
            // The last row of each insert among them: SQLite's B-tree layer assembles every record
            // it inserts in one scratch page of the connection, which keeps the last one.
            let needles = (Array(stride(from: 1, through: 2000, by: 97)) + [2000]).map { Self.rowNeedle(seed: seed, number: $0, label: "committed") }
                + (Array(stride(from: 2001, through: 4000, by: 97)) + [4000]).map { Self.rowNeedle(seed: seed, number: $0, label: "pending") }

            // Positive control: the rows are in SQLite's page cache, committed and pending alike.
            let before = try MemoryScanner.scan(for: needles)
            #expect(before.findings.contains { $0.label.hasPrefix("committed") }, "committed rows cached: \(before.findings.count) found")
            #expect(before.findings.contains { $0.label.hasPrefix("pending") }, "pending rows cached: \(before.findings.count) found")

            try fixture.device.lock()  // grace 0: the complete key goes now
            #expect(!fixture.device.isProtectedDataAvailable)
            let after = try MemoryScanner.scan(for: needles)
            print("SQLite at the discard: \(needles.count) rows searched, \(before.findings.count) copies before, "
                  + "\(after.findings.count) after, \(after.bytesScanned) bytes scanned")
            #expect(after.bytesScanned > 1 << 20)
            // Known finding (reported to the lead): the last record inserted before the lock, here
            // pending row 4000, stays in the one-page scratch buffer where SQLite's B-tree layer
            // assembles each record it inserts, freed (wiped) only when the connection closes;
            // a ProtectedDatabase keeps its connection over the lock. (The keychain closes its
            // connections at the discard: KeychainMemoryTests.) Every other row is gone.
            let scratch = after.findings.filter { $0.label == "pending row 4000" }
            #expect(after.findings.count == scratch.count, "left in memory: \(after.findings.prefix(20))")
            withKnownIssue("SQLite's B-tree scratch page keeps the last record inserted until the connection closes", isIntermittent: true) {
                #expect(scratch.isEmpty, "left in memory: \(scratch)")
            }

            try fixture.unlock()
            expectCode(.sqliteError) { try db.execute("COMMIT") }
            #expect(try db.query("SELECT count(*) FROM t").first?.values == [.integer(2000)], "the pending rows were rolled back")
            db.close()
        }
        #endif
    }
}
