import DataProtection
import DataProtectionGRDB
import Foundation
import GRDB
import SQLiteBridge
import Testing

/// A small GRDB app on a protected database: records, migrations, observation; then the
/// device locks, the next write throws the protected-data error, and after unlock
/// everything committed is there.
@Suite struct GRDBTests {
    struct Player: Codable, FetchableRecord, PersistableRecord, Equatable {
        var id: Int64?
        var name: String
        var score: Int
    }

    static func migrator() -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "player") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("name", .text).notNull()
            }
        }
        migrator.registerMigration("v2") { db in
            try db.alter(table: "player") { table in table.add(column: "score", .integer).notNull().defaults(to: 0) }
        }
        return migrator
    }

    @Test func queueRecordsMigrationsAndTheLock() throws {
        try withDatabaseStore { fixture in
            let queue = try DatabaseQueue(protectedAtPath: "Library/game.sqlite", in: fixture.store, protection: .complete)
            try Self.migrator().migrate(queue)
            try queue.write { db in
                try Player(id: nil, name: "Arthur", score: 10).insert(db)
                try Player(id: nil, name: "Barbara", score: 20).insert(db)
            }
            #expect(try fixture.store.attributesOfItem(atPath: "Library/game.sqlite").protectionClass == .complete)
            try fixture.device.lock()
            do {
                try queue.write { db in try Player(id: nil, name: "Craig", score: 30).insert(db) }
                Issue.record("a write after the lock succeeded")
            } catch {
                #expect(DataProtectionError(grdb: error)?.code == .protectedDataUnavailable, "\(error)")
                #expect((error as? DatabaseError)?.resultCode == .SQLITE_INTERRUPT, "the BEGIN, refused at the key discard")
            }
            #expect(throws: (any Error).self) { _ = try queue.read { db in try Player.fetchCount(db) } }
            try fixture.unlock()
            let players = try queue.read { db in try Player.order(Column("name")).fetchAll(db) }
            #expect(players.map(\.name) == ["Arthur", "Barbara"])
            #expect(try queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
            try queue.close()
        }
    }

    @Test("the queue's page cache (decrypted pages in SQLite's memory) is released when the device locks")
    func queueReleasesItsCacheAtTheLock() throws {
        try withDatabaseStore { fixture in
            let queue = try DatabaseQueue(protectedAtPath: "cache.sqlite", in: fixture.store, protection: .complete)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE t(x TEXT); WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 2000) INSERT INTO t SELECT 'needle-' || n FROM c")
            }
            func cached() -> Int { queue.inDatabase { db in SQLiteConnection.cachedBytes(ofConnection: db.sqliteConnection!) } }
            let before = cached()
            #expect(before > 20_000, "pages cached: \(before) bytes")
            try fixture.device.lock()
            let deadline = Date().addingTimeInterval(10)
            while cached() >= before / 4, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            #expect(cached() < before / 4, "after the lock: \(cached()) of \(before) bytes still cached")
            try queue.close()
        }
    }

    @Test func poolInWALModeWithObservation() async throws {
        let fixture = try DatabaseFixture()
        defer { fixture.remove() }
        let pool = try DatabasePool(protectedAtPath: "Library/pool.sqlite", in: fixture.store, protection: .complete)
        try Self.migrator().migrate(pool)
        let journalMode = try await pool.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(journalMode == "wal")
        #expect(fixture.store.fileExists(atPath: "Library/pool.sqlite-wal"))
        #expect(try fixture.store.attributesOfItem(atPath: "Library/pool.sqlite-wal").protectionClass == .complete)

        let observation = ValueObservation.tracking { db in try Player.fetchCount(db) }.removeDuplicates()
        var counts = observation.values(in: pool).makeAsyncIterator()
        #expect(try await counts.next() == 0)
        try await pool.write { db in try Player(id: nil, name: "Arthur", score: 1).insert(db) }
        #expect(try await counts.next() == 1)

        try fixture.device.lock()
        do {
            try await pool.write { db in try Player(id: nil, name: "Barbara", score: 2).insert(db) }
            Issue.record("a write after the lock succeeded")
        } catch {
            #expect(DataProtectionError(grdb: error)?.code == .protectedDataUnavailable, "\(error)")
        }
        try fixture.unlock()
        try await pool.write { db in try Player(id: nil, name: "Craig", score: 3).insert(db) }
        #expect(try await counts.next() == 2)
        let names = try await pool.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY name") }
        #expect(names == ["Arthur", "Craig"])
        try pool.close()
    }

    @Test func constraintErrorsStayGRDBErrors() throws {
        try withDatabaseStore { fixture in
            let queue = try DatabaseQueue(protectedAtPath: "x.sqlite", in: fixture.store)
            try queue.write { db in try db.execute(sql: "CREATE TABLE t(x INTEGER PRIMARY KEY); INSERT INTO t VALUES (1)") }
            do {
                try queue.write { db in try db.execute(sql: "INSERT INTO t VALUES (1)") }
                Issue.record("a duplicate key was accepted")
            } catch {
                #expect(DataProtectionError(grdb: error) == nil)
                #expect((error as? DatabaseError)?.resultCode == .SQLITE_CONSTRAINT)
            }
        }
    }
}
