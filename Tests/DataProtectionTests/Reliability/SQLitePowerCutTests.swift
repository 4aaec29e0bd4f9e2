import DataProtectionSQLite
import Foundation
import Testing
@testable import DataProtection

/// Power cuts inside a SQLite commit on a protected database: the commit runs on a
/// ``CrashingFileSystem`` that cuts the power at its k-th mutating call, for every k, both
/// ways of losing unsynced data and both journal modes. After the restart on the real
/// file system the database must open, pass SQLite's own `PRAGMA integrity_check`, and
/// hold the transaction whole or not at all, with the commit before it intact.
@Suite("Power cuts at every step of a SQLite commit")
struct SQLitePowerCutTests {
    static let passcode = "1234"

    /// A store on `fileSystem` holding `/db/app.db` (class `complete`) with one committed row.
    /// In the rollback-journal mode the connection keeps the journal its commits emptied
    /// (the transaction under test refills it), unless `freshJournal`: the database is then
    /// opened again, and the transaction creates its journal. With `restart` (WAL mode), the WAL
    /// holds frames that a checkpoint copied into the database: the transaction's first frame
    /// restarts it (SQLite writes a new WAL header, and the store drops the older frames).
    static func prepare(_ root: URL, _ fileSystem: any FileSystem, wal: Bool, freshJournal: Bool = false,
                        restart: Bool = false) throws -> (ProtectedStore, ProtectedDatabase) {
        let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: passcode)
        var database = try ProtectedDatabase(atPath: "/db/app.db", in: store, create: true, protection: .complete,
                                             journalMode: wal ? .wal : .rollback)
        try database.execute("PRAGMA synchronous=FULL; PRAGMA cache_size=4")
        try database.execute("CREATE TABLE t(n INTEGER PRIMARY KEY, payload BLOB NOT NULL); INSERT INTO t VALUES (0, zeroblob(10))")
        if restart {
            for n in 1...8 { try database.execute("INSERT INTO t VALUES (\(-n), randomblob(900))") }
            let checkpoint = try database.query("PRAGMA wal_checkpoint(PASSIVE)").first?.values ?? []
            guard checkpoint.count == 3, checkpoint[0] == .integer(0), checkpoint[1] == checkpoint[2] else {
                throw DataProtectionError(.ioFailure, "the checkpoint left frames: \(checkpoint)")
            }
        }
        if freshJournal {
            database.close()
            guard !store.fileExists(atPath: "/db/app.db-journal") else { throw DataProtectionError(.fileExists, "a journal is left") }
            database = try ProtectedDatabase(atPath: "/db/app.db", in: store)
            try database.execute("PRAGMA synchronous=FULL; PRAGMA cache_size=4")
        }
        return (store, database)
    }

    /// The transaction under test: enough rows to spill pages into the database file before the
    /// commit (40: some ten pages, which a WAL commit journals whole; 400: some hundred, which
    /// it writes in place after an allocating header).
    static func transaction(_ database: ProtectedDatabase, rows: Int = 40) throws(DataProtectionError) {
        try database.execute("""
            BEGIN;
            WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < \(rows))
            INSERT INTO t SELECT n, randomblob(900) FROM c;
            COMMIT
            """)
    }

    @Test("a power cut at every mutating call of a commit",
          arguments: [(wal: false, freshJournal: false, restart: false, rows: 40), (wal: false, freshJournal: true, restart: false, rows: 40),
                      (wal: true, freshJournal: false, restart: false, rows: 40), (wal: true, freshJournal: false, restart: false, rows: 400),
                      (wal: true, freshJournal: false, restart: true, rows: 40)])
    func powerCutAtEveryStep(wal: Bool, freshJournal: Bool, restart: Bool, rows: Int) throws {
        let counter = CrashingFileSystem(mode: .keepEverything)
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let (store, database) = try Self.prepare(root, counter, wal: wal, freshJournal: freshJournal, restart: restart)
        let summary = "SELECT count(*), min(n), max(n) FROM t"
        let before = try database.query(summary).first?.values
        let walBefore = restart ? try store.attributesOfItem(atPath: "/db/app.db-wal").size : 0
        counter.arm(crashAt: nil)
        try Self.transaction(database, rows: rows)
        let steps = counter.operations
        let after = try database.query(summary).first?.values
        #expect(after?.first == .integer(Int64(1 + rows + (restart ? 8 : 0))))
        if restart {
            let walAfter = try store.attributesOfItem(atPath: "/db/app.db-wal").size
            #expect(walAfter < walBefore, "the WAL was not started anew: \(walBefore) bytes, then \(walAfter)")
        }
        database.close()
        withExtendedLifetime(store) {}
        #expect(steps >= 2, "the commit makes mutating calls")

        var outcomes = (old: 0, new: 0)
        for mode in PowerCutTests.modes {
            for step in 1...steps {
                let fileSystem = CrashingFileSystem(mode: mode)
                let root = IOFaultTests.scratch()
                defer { try? FileManager.default.removeItem(at: root) }
                let (store, database) = try Self.prepare(root, fileSystem, wal: wal, freshJournal: freshJournal, restart: restart)
                fileSystem.arm(crashAt: step)
                _ = try? Self.transaction(database, rows: rows)
                let context = "\(Self.name(wal: wal, freshJournal: freshJournal, restart: restart, rows: rows)), \(mode), power cut at step \(step) of \(steps)"
                guard fileSystem.hasCrashed else {
                    Issue.record("\(context): no crash")
                    continue
                }
                database.close()  // the dead process's connection: every call of its file system fails
                let restarted = try ScratchStore.restarted(at: root, replacing: store)
                try restarted.device.unlock(passcode: Self.passcode)
                let reopened = try ProtectedDatabase(atPath: "/db/app.db", in: restarted)
                #expect(try reopened.query("PRAGMA integrity_check").first?.texts == ["ok"], "\(context)")
                let rows = try reopened.query(summary).first?.values
                switch rows {
                case before: outcomes.old += 1
                case after: outcomes.new += 1
                default: Issue.record("\(context): the table holds \(String(describing: rows)), neither before nor after the commit")
                }
                reopened.close()
            }
        }
        print("SQLITE-POWER-CUTS \(Self.name(wal: wal, freshJournal: freshJournal, restart: restart, rows: rows)): \(steps) steps x \(PowerCutTests.modes.count) modes: \(outcomes.old) rolled back, \(outcomes.new) committed, integrity_check ok every time")
        // In both modes the commit point is the last call of all: in WAL mode the `fsync` of the WAL's store
        // journal (the commit chained, its header and records in place left for the checkpoint), in
        // rollback-journal mode the journal's removal (or emptying) made durable. A cut there keeps the old
        // rows, or (pages torn at random) the new ones; a cut anywhere else keeps the old.
        #expect(outcomes.old > 0)
        #expect(outcomes.old + outcomes.new == steps * PowerCutTests.modes.count)
    }

    static func name(wal: Bool, freshJournal: Bool, restart: Bool, rows: Int) -> String {
        (wal ? (restart ? "WAL, restarted" : "WAL") : freshJournal ? "rollback journal, created" : "rollback journal, kept") + ", \(rows) rows"
    }

    /// A database moved while open (its file, renamed in its directory) with a transaction
    /// committed: its WAL, or the journal its connection keeps, moves with it. A crash at every
    /// mutating call of the move leaves the database at its old name or its new one, opening
    /// with every commit and `integrity_check` ok, and (once open) nothing but it and its side
    /// files in its directory. The process stops at the crash (``CrashingFileSystem/Mode/keepEverything``:
    /// the model undoes a removal of a second name as a copy, not a link).
    @Test("a crash at every step of a move of an open database", arguments: [false, true])
    func crashAtEveryStepOfAMove(wal: Bool) throws {
        let summary = "SELECT count(*), min(n), max(n) FROM t"
        let counter = CrashingFileSystem(mode: .keepEverything)
        let root = IOFaultTests.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let (store, database) = try Self.prepare(root, counter, wal: wal)
        try Self.transaction(database)
        let committed = try database.query(summary).first?.values
        #expect(try store.contentsOfDirectory(atPath: "/db").sorted() == ["app.db", wal ? "app.db-wal" : "app.db-journal"],
                "the side file is there to move")
        counter.arm(crashAt: nil)
        try store.moveItem(atPath: "/db/app.db", toPath: "/db/moved.db")
        let steps = counter.operations
        #expect(try store.contentsOfDirectory(atPath: "/db").sorted() == ["moved.db", wal ? "moved.db-wal" : "moved.db-journal"])
        try database.execute("INSERT INTO t VALUES (-1, x'00')")
        #expect(try store.contentsOfDirectory(atPath: "/db").sorted() == ["moved.db", wal ? "moved.db-wal" : "moved.db-journal"])
        database.close()
        withExtendedLifetime(store) {}

        var outcomes = (old: 0, new: 0)
        for step in 1...steps {
            let fileSystem = CrashingFileSystem(mode: .keepEverything)
            let root = IOFaultTests.scratch()
            defer { try? FileManager.default.removeItem(at: root) }
            let (store, database) = try Self.prepare(root, fileSystem, wal: wal)
            try Self.transaction(database)
            fileSystem.arm(crashAt: step)
            _ = try? store.moveItem(atPath: "/db/app.db", toPath: "/db/moved.db")
            let context = "\(wal ? "WAL" : "rollback journal"), crash at step \(step) of \(steps) of the move"
            guard fileSystem.hasCrashed else {
                Issue.record("\(context): no crash")
                continue
            }
            database.close()
            let restarted = try ScratchStore.restarted(at: root, replacing: store)
            try restarted.device.unlock(passcode: Self.passcode)
            let name = restarted.fileExists(atPath: "/db/moved.db") ? "moved.db" : "app.db"
            if name == "app.db" { outcomes.old += 1 } else { outcomes.new += 1 }
            let reopened = try ProtectedDatabase(atPath: "/db/" + name, in: restarted)
            #expect(try reopened.query("PRAGMA integrity_check").first?.texts == ["ok"], "\(context)")
            #expect(try reopened.query(summary).first?.values == committed, "\(context): a commit lost")
            let beside = Set(try restarted.contentsOfDirectory(atPath: "/db"))
            #expect(beside.contains(name) && beside.isSubset(of: [name, name + "-journal", name + "-wal"]), "\(context): /db holds \(beside.sorted())")
            reopened.close()
        }
        print("SQLITE-MOVE-CRASHES \(wal ? "WAL" : "rollback journal"): \(steps) steps: \(outcomes.old) at the old name, \(outcomes.new) at the new one, every commit kept")
        #expect(outcomes.old > 0 && outcomes.new > 0)
    }
}
