import DataProtection
import DataProtectionGRDB
import Foundation
import GRDB
import SQLiteBridge
import Synchronization
import Testing

/// GRDB queues and pools keep the contract of a protected database at a key discard: the open
/// transaction is rolled back, and every statement fails until the key is back, even one
/// SQLite could answer from its cache or without the file; erase leaves them answering nothing.
@Suite("GRDB at a key discard", .serialized) struct GRDBKeyDiscardTests {
    /// The error GRDB threw, as the store's.
    static func code(_ body: () throws -> Void) -> DataProtectionError.Code? {
        do {
            try body()
            return nil
        } catch {
            return DataProtectionError(grdb: error)?.code ?? .sqliteError
        }
    }

    static func makeTable(_ writer: some DatabaseWriter) throws {
        try writer.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, secret TEXT)")
            for id in 1...20 { try db.execute(sql: "INSERT INTO t(secret) VALUES (?)", arguments: ["row-\(id)"]) }
        }
    }

    @Test("a queue: a transaction open at the lock is rolled back; SELECT 1, cached rows and COMMIT are refused until unlock")
    func queueTransactionAtTheLock() throws {
        try withDatabaseStore { fixture in
            var configuration = Configuration()
            configuration.allowsUnsafeTransactions = true  // a transaction across accesses
            let queue = try DatabaseQueue(protectedAtPath: "q.sqlite", in: fixture.store, protection: .complete,
                                          configuration: configuration)
            try Self.makeTable(queue)
            try queue.inDatabase { db in
                try db.execute(sql: "BEGIN IMMEDIATE")
                try db.execute(sql: "INSERT INTO t(secret) VALUES ('uncommitted')")
                // Every page of t is now in SQLite's cache.
                #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM t") == 21)
            }
            try fixture.device.lock()  // grace 0: the key goes now
            #expect(queue.inDatabase { db in db.isInsideTransaction } == false, "the transaction was rolled back at the discard")
            #expect(Self.code { _ = try queue.inDatabase { db in try Int.fetchOne(db, sql: "SELECT 1") } } == .protectedDataUnavailable)
            #expect(Self.code { _ = try queue.inDatabase { db in try String.fetchAll(db, sql: "SELECT secret FROM t") } } == .protectedDataUnavailable)
            #expect(Self.code { try queue.inDatabase { db in try db.execute(sql: "COMMIT") } } == .protectedDataUnavailable)
            #expect(Self.code { try queue.write { db in try db.execute(sql: "INSERT INTO t(secret) VALUES ('locked')") } } == .protectedDataUnavailable)
            try fixture.unlock()
            #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 20)
            #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT 1") } == 1)
            try queue.write { db in try db.execute(sql: "INSERT INTO t(secret) VALUES ('after')") }
            #expect(try queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
            try queue.close()
        }
    }

    @Test("a queue: a statement running in a write when the key goes stops, and the write is rolled back")
    func queueWriteCutByTheDiscard() throws {
        try withDatabaseStore { fixture in
            let queue = try DatabaseQueue(protectedAtPath: "w.sqlite", in: fixture.store, protection: .complete)
            try Self.makeTable(queue)
            let inside = DispatchSemaphore(value: 0)
            let goOn = DispatchSemaphore(value: 0)
            let lockReturned = DispatchSemaphore(value: 0)
            let writeEnded = DispatchSemaphore(value: 0)
            let outcome = Mutex<DataProtectionError.Code?>(nil)
            Thread {
                let code = Self.code {
                    try queue.write { db in
                        try db.execute(sql: "INSERT INTO t(secret) VALUES ('in the write')")
                        inside.signal()
                        goOn.wait()
                        // Served from SQLite's cache before: now refused.
                        _ = try String.fetchAll(db, sql: "SELECT secret FROM t")
                    }
                }
                outcome.withLock { $0 = code }
                writeEnded.signal()
            }.start()
            inside.wait()
            let device = fixture.device
            Thread {
                try? device.lock()  // waits up to 2 s for the writer's queue, then goes on
                lockReturned.signal()
            }.start()
            #expect(lockReturned.wait(timeout: .now() + 30) == .success)
            goOn.signal()
            #expect(writeEnded.wait(timeout: .now() + 30) == .success)
            #expect(outcome.withLock { $0 } == .protectedDataUnavailable)
            try fixture.unlock()
            #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 20)
            #expect(try queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
        }
    }

    @Test("a pool: readers and the writer refuse every statement while the key is away, and work after unlock")
    func poolRefusesWhileLocked() throws {
        try withDatabaseStore { fixture in
            let pool = try DatabasePool(protectedAtPath: "p.sqlite", in: fixture.store, protection: .complete)
            try Self.makeTable(pool)
            #expect(try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 20)
            try fixture.device.lock()
            #expect(Self.code { _ = try pool.read { db in try Int.fetchOne(db, sql: "SELECT 1") } } == .protectedDataUnavailable)
            #expect(Self.code { _ = try pool.read { db in try String.fetchAll(db, sql: "SELECT secret FROM t") } } == .protectedDataUnavailable)
            #expect(Self.code { _ = try pool.write { db in try Int.fetchOne(db, sql: "SELECT 1") } } == .protectedDataUnavailable)
            try fixture.unlock()
            #expect(try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 20)
            try pool.write { db in try db.execute(sql: "INSERT INTO t(secret) VALUES ('after')") }
            #expect(try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 21)
        }
    }

    @Test("a class that stays available (completeUntilFirstUserAuthentication) is not touched by the lock")
    func otherClassesUntouched() throws {
        try withDatabaseStore { fixture in
            var configuration = Configuration()
            configuration.allowsUnsafeTransactions = true
            let queue = try DatabaseQueue(protectedAtPath: "c.sqlite", in: fixture.store,
                                          protection: .completeUntilFirstUserAuthentication, configuration: configuration)
            try Self.makeTable(queue)
            try queue.inDatabase { db in try db.execute(sql: "BEGIN; INSERT INTO t(secret) VALUES ('kept')") }
            try fixture.device.lock()
            try queue.inDatabase { db in try db.execute(sql: "COMMIT") }
            #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 21)
        }
    }

    @Test("after an erase, a queue answers nothing again (handleClosed), not even SELECT 1")
    func eraseLeavesNothingAnswering() throws {
        try withDatabaseStore { fixture in
            let queue = try DatabaseQueue(protectedAtPath: "e.sqlite", in: fixture.store, protection: .completeUntilFirstUserAuthentication)
            try Self.makeTable(queue)
            try fixture.device.erase()
            #expect(Self.code { _ = try queue.read { db in try Int.fetchOne(db, sql: "SELECT 1") } } == .handleClosed)
            #expect(Self.code { _ = try queue.read { db in try String.fetchAll(db, sql: "SELECT secret FROM t") } } == .handleClosed)
        }
    }
}
