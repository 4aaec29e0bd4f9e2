import DataProtectionSQLite
import Foundation
import SodiumBridge
import Testing
@testable import DataProtection
@testable import DataProtectionBackup

/// Databases in a backup: a WAL database with frames not yet checkpointed, and a rollback
/// one, are whole in the archive (for dpctl and for the real sqlite3).
@Suite("Backups: databases")
struct BackupDatabaseTests {
    @Test("a WAL database with uncheckpointed frames (its connection open) and a rollback database: restored rows and sqlite3 on the extracted files agree")
    func walAndRollback() throws {
        try withScratch { root in
            let source = try makeStore(in: root, name: "source")
            let wal = try ProtectedDatabase(atPath: "data/wal.db", in: source, create: true, protection: .complete, journalMode: .wal)
            try wal.execute("PRAGMA wal_autocheckpoint = 0")
            try wal.execute("CREATE TABLE t(x INTEGER, y TEXT)")
            for batch in 0..<10 {
                try wal.execute("BEGIN")
                for row in 0..<100 { try wal.execute("INSERT INTO t VALUES (?, ?)", [.integer(Int64(batch * 100 + row)), .text(String(repeating: "w", count: 200))]) }
                try wal.execute("COMMIT")
            }
            let rollback = try ProtectedDatabase(atPath: "data/rollback.db", in: source, create: true, protection: .completeUntilFirstUserAuthentication)
            try rollback.execute("CREATE TABLE r(x); INSERT INTO r VALUES (7), (8);")
            rollback.close()
            // The frames are in the WAL, not yet in the database file.
            #expect(try source.attributesOfItem(atPath: "data/wal.db-wal").size > 200_000)

            let (keyFile, recipient) = try ageKeygen(in: root)
            let archive = root.appendingPathComponent("db.age")
            try backUp(source, to: archive, recipients: [try AgeRecipient(recipient)])
            wal.close()

            let target = try makeStore(in: root, name: "target", passcode: "9876")
            try restore(archive, into: target, identities: try identities(in: keyFile))
            let restored = try ProtectedDatabase(atPath: "data/wal.db", in: target)
            #expect(try restored.query("SELECT count(*), sum(x) FROM t").first?.texts == ["1000", "499500"])
            restored.close()
            let restoredRollback = try ProtectedDatabase(atPath: "data/rollback.db", in: target)
            #expect(try restoredRollback.query("SELECT sum(x) FROM r").first?.texts == ["15"])
            restoredRollback.close()

            // The real sqlite3 on what age -d | tar -x gives.
            let tarFile = root.appendingPathComponent("db.tar"), out = root.appendingPathComponent("out")
            #expect(try run("/usr/bin/age", ["-d", "-i", keyFile.path, "-o", tarFile.path, archive.path]).status == 0)
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
            #expect(try run("/usr/bin/tar", ["-x", "-f", tarFile.path, "-C", out.path]).status == 0)
            let counted = try run("/usr/bin/sqlite3", [out.appendingPathComponent("data/wal.db").path, "SELECT count(*) FROM t"])
            #expect(String(decoding: counted.output, as: UTF8.self) == "1000\n", "\(counted.error)")
        }
    }

    @Test("a writer thread of the same process commits and checkpoints a WAL database during the backups: each archived database opens in sqlite3 with integrity ok and holds a gap-free committed prefix")
    func writerDuringBackup() throws {
        try withScratch { root in
            let source = try makeStore(in: root, name: "source")
            let setup = try ProtectedDatabase(atPath: "live/counter.db", in: source, create: true, protection: .complete, journalMode: .wal)
            // Pages enough that copying takes a while: a big table beside the counter.
            try setup.execute("CREATE TABLE counter(n INTEGER PRIMARY KEY, pad BLOB); CREATE TABLE bulk(x BLOB)")
            try setup.execute("BEGIN")
            for _ in 0..<400 { try setup.execute("INSERT INTO bulk VALUES (randomblob(8000))") }
            try setup.execute("COMMIT")
            setup.close()

            let stop = Locked(false)
            let committed = Locked(0)
            let failure = Locked<String?>(nil)
            let writerDone = DispatchGroup()
            writerDone.enter()
            Thread.detachNewThread {
                defer { writerDone.leave() }
                do {
                    let writer = try ProtectedDatabase(atPath: "live/counter.db", in: source)
                    defer { writer.close() }
                    var n = 0
                    while !stop.withLock({ $0 }) {
                        n += 1
                        try writer.execute("INSERT INTO counter VALUES (?, randomblob(3000))", [.integer(Int64(n))])
                        committed.withLock { $0 = n }
                        if n % 25 == 0 { try writer.execute("PRAGMA wal_checkpoint(PASSIVE)") }
                    }
                } catch {
                    failure.withLock { $0 = "\(error)" }
                }
            }
            defer { stop.withLock { $0 = true }; writerDone.wait() }
            #expect(eventually { committed.withLock { $0 } > 50 })

            let (keyFile, recipient) = try ageKeygen(in: root)
            for round in 0..<4 {
                let archive = root.appendingPathComponent("live-\(round).age")
                try backUp(source, to: archive, recipients: [try AgeRecipient(recipient)])
                let tarFile = root.appendingPathComponent("live-\(round).tar"), out = root.appendingPathComponent("live-\(round)")
                #expect(try run("/usr/bin/age", ["-d", "-i", keyFile.path, "-o", tarFile.path, archive.path]).status == 0)
                try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
                #expect(try run("/usr/bin/tar", ["-x", "-f", tarFile.path, "-C", out.path]).status == 0)
                // One file stands for the database: no WAL beside it.
                #expect(!FileManager.default.fileExists(atPath: out.appendingPathComponent("live/counter.db-wal").path))
                let database = out.appendingPathComponent("live/counter.db").path
                let integrity = try run("/usr/bin/sqlite3", [database, "PRAGMA integrity_check"])
                #expect(String(decoding: integrity.output, as: UTF8.self) == "ok\n", "round \(round): \(String(decoding: integrity.output, as: UTF8.self)) \(integrity.error)")
                let counted = try run("/usr/bin/sqlite3", [database, "SELECT count(*) = max(n) AND min(n) = 1, count(*) FROM counter"])
                let answer = String(decoding: counted.output, as: UTF8.self)
                #expect(answer.hasPrefix("1|"), "round \(round): \(answer) \(counted.error): not a gap-free prefix")
                try? FileManager.default.removeItem(at: tarFile)
            }
            stop.withLock { $0 = true }
            writerDone.wait()
            #expect(failure.withLock { $0 } == nil, "\(failure.withLock { $0 } ?? "")")
            // Nothing of the copies is left in the store.
            #expect(!source.fileExists(atPath: Backup.snapshotDirectory))
        }
    }
}
