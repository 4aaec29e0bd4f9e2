import DataProtection
import DataProtectionSQLite
import Foundation
import Testing

/// The rollback journal between transactions: kept open and empty while the database is
/// open (no file created, renamed or removed per commit), absent to SQLite, and removed
/// with the database's last connection.
@Suite struct KeptJournalsTests {
    /// The inode of every regular file under the store's directory but the store's own journals.
    static func inodes(_ fixture: DatabaseFixture) throws -> [String: Int] {
        var result: [String: Int] = [:]
        for url in fixture.filesOnDisk().keys where !url.lastPathComponent.hasSuffix(".j") {
            result[url.lastPathComponent] = try FileManager.default.attributesOfItem(atPath: url.path)[.systemFileNumber] as? Int
        }
        return result
    }

    @Test("commits in the rollback-journal mode reuse one empty journal; the last connection's close removes it")
    func journalIsKeptBetweenTransactions() throws {
        try withDatabaseStore { fixture in
            let db = try ProtectedDatabase(atPath: "app.db", in: fixture.store, create: true, protection: .complete, journalMode: .rollback)
            try db.execute("CREATE TABLE t(n INTEGER PRIMARY KEY, v TEXT)")
            try db.execute("INSERT INTO t(v) VALUES ('first')")
            #expect(try fixture.store.contentsOfDirectory(atPath: "/").sorted() == ["app.db", "app.db-journal"])
            let journal = try fixture.store.attributesOfItem(atPath: "app.db-journal")
            #expect(journal.size == 0)
            #expect(journal.protectionClass == .complete)
            let before = try Self.inodes(fixture)
            for index in 0..<10 { try db.execute("INSERT INTO t(v) VALUES ('row \(index)')") }
            try db.execute("BEGIN; INSERT INTO t(v) VALUES ('rolled back'); ROLLBACK")
            #expect(try Self.inodes(fixture) == before, "the same files, none created or replaced by the commits")
            #expect(try fixture.store.attributesOfItem(atPath: "app.db-journal").size == 0)

            // A second connection sees an empty journal as none (not hot) and leaves it when it closes.
            let other = try ProtectedDatabase(atPath: "app.db", in: fixture.store)
            #expect(try other.query("SELECT count(*) FROM t").first?.values == [.integer(11)])
            other.close()
            #expect(try fixture.store.contentsOfDirectory(atPath: "/").sorted() == ["app.db", "app.db-journal"])
            try db.execute("INSERT INTO t(v) VALUES ('last')")
            db.close()
            #expect(try fixture.store.contentsOfDirectory(atPath: "/") == ["app.db"])

            let reopened = try ProtectedDatabase(atPath: "app.db", in: fixture.store)
            #expect(try reopened.query("PRAGMA integrity_check").first?.texts == ["ok"])
            #expect(try reopened.query("SELECT count(*) FROM t").first?.values == [.integer(12)])
            reopened.close()
        }
    }

    @Test("a database switched to WAL lets its emptied rollback journal go at once")
    func walModeDropsTheJournal() throws {
        try withDatabaseStore { fixture in
            let db = try ProtectedDatabase(atPath: "app.db", in: fixture.store, create: true, protection: .complete, journalMode: .rollback)
            try db.execute("CREATE TABLE t(n INTEGER)")
            #expect(try fixture.store.contentsOfDirectory(atPath: "/").sorted() == ["app.db", "app.db-journal"])
            try db.execute("PRAGMA journal_mode=WAL; INSERT INTO t VALUES (1)")
            #expect(try fixture.store.contentsOfDirectory(atPath: "/").sorted() == ["app.db", "app.db-wal"])
            db.close()
        }
    }

    @Test("a commit while the class key is gone fails, and after unlock the kept journal serves the next one")
    func keptJournalAcrossTheLock() throws {
        try withDatabaseStore { fixture in
            let db = try ProtectedDatabase(atPath: "app.db", in: fixture.store, create: true, protection: .complete, journalMode: .rollback)
            try db.execute("CREATE TABLE t(n INTEGER); INSERT INTO t VALUES (1)")
            try fixture.device.lock()
            expectCode(.protectedDataUnavailable) { try db.execute("INSERT INTO t VALUES (2)") }
            try fixture.unlock()
            try db.execute("INSERT INTO t VALUES (3)")
            #expect(try db.query("SELECT group_concat(n) FROM t").first?.texts == ["1,3"])
            #expect(try fixture.store.attributesOfItem(atPath: "app.db-journal").size == 0)
            db.close()
            #expect(try fixture.store.contentsOfDirectory(atPath: "/") == ["app.db"])
        }
    }
}
