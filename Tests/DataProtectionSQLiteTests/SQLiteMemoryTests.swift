import DataProtection
import DataProtectionSQLite
import SQLiteBridge
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
            fixture.device.lock()
            let deadline = Date().addingTimeInterval(10)
            while db.cachedBytes >= cached / 4, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            #expect(db.cachedBytes < cached / 4, "after the lock: \(db.cachedBytes) of \(cached) bytes still cached")
            try fixture.unlock()
            #expect(try db.query("SELECT count(*) FROM t").first?.values == [.integer(2000)], "read again from the store")
            db.close()
        }
    }
}
