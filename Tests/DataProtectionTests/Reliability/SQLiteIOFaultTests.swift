import DataProtectionSQLite
import Foundation
import Testing
@testable import DataProtection

/// I/O faults inside a SQLite commit on a protected database: every call of the store's
/// file system during the commit fails in turn (EIO, and the typical errno of the call).
/// The commit either succeeds or fails with `ioFailure`; either way the database passes
/// `PRAGMA integrity_check`, holds the transaction whole or not at all (whole if the
/// commit was acknowledged), keeps working in this process, and says the same after a
/// crash and restart.
@Suite("I/O faults at every call of a SQLite commit")
struct SQLiteIOFaultTests {
    static func count(_ database: ProtectedDatabase) throws -> Int64? {
        if case .integer(let count)? = try database.query("SELECT count(*) FROM t").first?.values.first { return count }
        return nil
    }

    @Test("every call of a commit failed in turn", arguments: [false, true])
    func faultAtEveryCall(wal: Bool) throws {
        let counter = FaultInjectingFileSystem()
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let (store, database) = try SQLitePowerCutTests.prepare(root, counter, wal: wal)
        counter.resetCounts()
        try SQLitePowerCutTests.transaction(database)
        let counts = counter.counts
        database.close()
        withExtendedLifetime(store) {}

        var tally = (injected: 0, failed: 0, absorbed: 0)
        for call in FaultInjectingFileSystem.Call.allCases {
            for occurrence in stride(from: 1, through: counts[call] ?? 0, by: 1) {
                for errno in IOFaultTests.errnos(for: call) {
                    let fault = FaultInjectingFileSystem.Fault(call: call, occurrence: occurrence, errno: errno)
                    let context = "\(wal ? "WAL" : "rollback journal"), \(fault)"
                    let fileSystem = FaultInjectingFileSystem()
                    let root = IOFaultTests.scratch()
                    defer { try? FileManager.default.removeItem(at: root) }
                    let (store, database) = try SQLitePowerCutTests.prepare(root, fileSystem, wal: wal)
                    fileSystem.arm(fault)
                    var committed = false
                    do throws(DataProtectionError) {
                        try SQLitePowerCutTests.transaction(database)
                        committed = true
                    } catch {
                        #expect(error.code == .ioFailure, "\(context): \(error)")
                    }
                    fileSystem.disarm()
                    #expect(fileSystem.doubleCloses.isEmpty, "\(context): descriptors closed twice: \(fileSystem.doubleCloses)")
                    guard fileSystem.injected == 1 else {
                        Issue.record("\(context): the fault was not reached")
                        continue
                    }
                    tally.injected += 1
                    if committed { tally.absorbed += 1 } else { tally.failed += 1 }
                    #expect(!database.isInTransaction, "\(context): no transaction left open")
                    #expect(try database.query("PRAGMA integrity_check").first?.texts == ["ok"], "\(context)")
                    let seen = try Self.count(database)
                    // An acknowledged commit is whole; a failed one is whole or absent (SQLite's own rule for a
                    // COMMIT that fails after its commit point, as when the journal cannot be removed).
                    #expect(seen == 41 || (!committed && seen == 1), "\(context): \(String(describing: seen)) rows, committed \(committed)")
                    try database.execute("INSERT INTO t VALUES (1000, x'00')")

                    try store.device.crash()
                    database.close()
                    let restarted = try ScratchStore.restarted(at: root, replacing: store)
                    try restarted.device.unlock(passcode: SQLitePowerCutTests.passcode)
                    let reopened = try ProtectedDatabase(atPath: "/db/app.db", in: restarted)
                    #expect(try reopened.query("PRAGMA integrity_check").first?.texts == ["ok"], "\(context): after a restart")
                    #expect(try Self.count(reopened) == seen.map { $0 + 1 }, "\(context): after a restart, what this process saw")
                    reopened.close()
                }
            }
        }
        print("SQLITE-IO-FAULTS \(wal ? "WAL" : "rollback journal"): \(tally.injected) faults injected, \(tally.failed) reported as ioFailure, \(tally.absorbed) absorbed; integrity_check ok every time")
        #expect(tally.injected >= counts.values.reduce(0, +))
    }
}
