import DataProtection
import DataProtectionSQLite
import Foundation
import Testing

@Suite struct ProtectedDatabaseTests {
    static let modes: [ProtectedDatabase.JournalMode] = [.rollback, .wal]

    @Test(arguments: modes) func rowsRoundTripAndSurviveReopening(mode: ProtectedDatabase.JournalMode) throws {
        try withDatabaseStore { fixture in
            let db = try ProtectedDatabase(atPath: "Library/app.db", in: fixture.store, create: true, protection: .complete, journalMode: mode)
            try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT, score REAL, data BLOB)")
            try db.execute("BEGIN")
            for index in 1...500 {
                try db.execute("INSERT INTO note(body, score, data) VALUES (?, ?, ?)",
                               [.text("note \(index)"), .real(Double(index) / 4), .blob(Data([UInt8(index % 256)]))])
            }
            try db.execute("COMMIT")
            #expect(db.lastInsertRowID == 500)
            let rows = try db.query("SELECT id, body, score, data FROM note WHERE id = ?", [.integer(7)])
            #expect(rows.map(\.values) == [[.integer(7), .text("note 7"), .real(1.75), .blob(Data([7]))]])
            #expect(rows.first?.texts == ["7", "note 7", "1.75", nil])
            db.close()
            expectCode(.handleClosed) { _ = try db.query("SELECT 1") }

            let again = try ProtectedDatabase(atPath: "/Library//app.db".replacingOccurrences(of: "//", with: "/"), in: fixture.store)
            #expect(try again.query("SELECT count(*), sum(length(body)) FROM note").first?.values == [.integer(500), .integer(3892)])
            #expect(try fixture.store.attributesOfItem(atPath: "Library/app.db").protectionClass == .complete)
            #expect(try again.query("PRAGMA journal_mode").first?.texts == [mode.rawValue])
        }
    }

    @Test func theDatabaseNeverReachesTheDiskInPlaintext() throws {
        try withDatabaseStore { fixture in
            let db = try ProtectedDatabase(atPath: "secret.db", in: fixture.store, create: true, protection: .complete, journalMode: .wal)
            try db.execute("CREATE TABLE t(x TEXT)")
            try db.execute("INSERT INTO t VALUES ('needle-in-the-haystack')")
            let marker = Data("needle-in-the-haystack".utf8)
            let header = Data("SQLite format 3".utf8)
            for (url, bytes) in fixture.filesOnDisk() {
                #expect(bytes.range(of: marker) == nil, "plaintext row in \(url.path)")
                #expect(bytes.range(of: header) == nil, "plaintext SQLite header in \(url.path)")
            }
            #expect(try fixture.store.contentsOfDirectory(atPath: "/").sorted() == ["secret.db", "secret.db-wal"])
            #expect(try fixture.store.attributesOfItem(atPath: "secret.db-wal").protectionClass == .complete)
            db.close()
        }
    }

    @Test("a database file and its WAL are sealed in chunks of a page (4 KiB), ordinary files in 16 KiB chunks")
    func databaseChunksArePages() throws {
        try withDatabaseStore { fixture in
            let db = try ProtectedDatabase(atPath: "pages.db", in: fixture.store, create: true, protection: .complete, journalMode: .wal)
            try db.execute("CREATE TABLE t(x BLOB)")
            for _ in 0..<20 { try db.execute("INSERT INTO t VALUES (randomblob(3000))") }
            try fixture.store.write(Data(repeating: 7, count: 50_000), to: "plain.bin")
            // Chunk shifts from every protected file's header (magic "DPFH", the shift at byte 6).
            let shifts = fixture.filesOnDisk().values.filter { $0.starts(with: Data("DPFH".utf8)) }.map { Int($0[6]) }.sorted()
            #expect(shifts == [12, 12, 14], "chunk shifts on disk: \(shifts)")
            db.close()
            // Reopened and changed in place, page by page: the rows are intact.
            let again = try ProtectedDatabase(atPath: "pages.db", in: fixture.store)
            try again.execute("UPDATE t SET x = zeroblob(2000) WHERE rowid % 3 = 0")
            #expect(try again.query("SELECT count(*), sum(length(x)) FROM t").first?.values == [.integer(20), .integer(14 * 3000 + 6 * 2000)])
            #expect(try again.query("PRAGMA integrity_check").first?.texts == ["ok"])
            again.close()
        }
    }

    @Test("a WAL restarted by SQLite drops its older frames: the next frames are appended, and every row stays")
    func restartedWriteAheadLogStartsEmpty() throws {
        try withDatabaseStore { fixture in
            let db = try ProtectedDatabase(atPath: "log.db", in: fixture.store, create: true, protection: .complete, journalMode: .wal)
            try db.execute("PRAGMA wal_autocheckpoint=0; CREATE TABLE t(n INTEGER PRIMARY KEY, x BLOB)")
            for n in 1...30 { try db.execute("INSERT INTO t VALUES (\(n), randomblob(3000))") }
            let full = try fixture.store.attributesOfItem(atPath: "log.db-wal").size
            #expect(full > 30 * 4096)
            // Every frame copied into the database: the next commit writes its frames from the start.
            let checkpoint = try db.query("PRAGMA wal_checkpoint(PASSIVE)").first?.values ?? []
            #expect(checkpoint.count == 3 && checkpoint[0] == .integer(0) && checkpoint[1] == checkpoint[2], "not every frame copied: \(checkpoint)")
            try db.execute("INSERT INTO t VALUES (31, randomblob(3000))")
            let restarted = try fixture.store.attributesOfItem(atPath: "log.db-wal").size
            #expect(restarted < 4 * 4120, "the WAL after its restart: \(restarted) bytes (before: \(full))")
            #expect(try db.query("SELECT count(*) FROM t").first?.values == [.integer(31)])
            db.close()
            let again = try ProtectedDatabase(atPath: "log.db", in: fixture.store)
            #expect(try again.query("SELECT count(*), min(n), max(n) FROM t").first?.values == [.integer(31), .integer(1), .integer(31)])
            #expect(try again.query("PRAGMA integrity_check").first?.texts == ["ok"])
            again.close()
        }
    }

    @Test func missingDatabaseIsFileNotFoundAndSQLErrorsKeepSQLitesCode() throws {
        try withDatabaseStore { fixture in
            expectCode(.fileNotFound) { _ = try ProtectedDatabase(atPath: "nowhere.db", in: fixture.store) }
            #expect(!fixture.store.fileExists(atPath: "nowhere.db"))
            let db = try ProtectedDatabase(atPath: "a.db", in: fixture.store, create: true)
            do throws(DataProtectionError) {
                try db.execute("CREATE TABLE t(x INTEGER PRIMARY KEY); INSERT INTO t VALUES (1); INSERT INTO t VALUES (1)")
                Issue.record("a duplicate key was accepted")
            } catch {
                #expect(error.code == .sqliteError)
                #expect(error.sqliteCode == 1555)  // SQLITE_CONSTRAINT_PRIMARYKEY
            }
            expectCode(.sqliteError) { try db.execute("SELEC 1") }
            expectCode(.invalidPath) { _ = try ProtectedDatabase.uri(forPath: "", in: fixture.store) }
            #expect(try fixture.store.attributesOfItem(atPath: "a.db").protectionClass == .completeUntilFirstUserAuthentication)
        }
    }

    @Test(arguments: modes) func completeDatabaseFailsWhileLockedAndRecoversAfterUnlock(mode: ProtectedDatabase.JournalMode) throws {
        try withDatabaseStore { fixture in
            let db = try ProtectedDatabase(atPath: "c.db", in: fixture.store, create: true, protection: .complete, journalMode: mode)
            try db.execute("CREATE TABLE t(x INTEGER)")
            try db.execute("INSERT INTO t VALUES (1)")
            try db.execute("BEGIN")
            try db.execute("INSERT INTO t VALUES (2)")
            try fixture.device.lock()
            expectCode(.protectedDataUnavailable) {
                try db.execute("INSERT INTO t VALUES (3)")
                try db.execute("COMMIT")
            }
            #expect(!db.isInTransaction)
            expectCode(.protectedDataUnavailable) { _ = try db.query("SELECT count(*) FROM t") }
            expectCode(.protectedDataUnavailable) { _ = try ProtectedDatabase(atPath: "c.db", in: fixture.store) }
            try fixture.unlock()
            #expect(try db.query("SELECT x FROM t ORDER BY x").map(\.values) == [[.integer(1)]])
            try db.execute("INSERT INTO t VALUES (4)")
            #expect(try db.query("PRAGMA integrity_check").first?.texts == ["ok"])
            #expect(try db.query("SELECT x FROM t ORDER BY x").map(\.values) == [[.integer(1)], [.integer(4)]])
        }
    }

    @Test func completeUnlessOpenDatabaseKeepsWorkingWhileLockedAndCanBeCreatedLocked() throws {
        try withDatabaseStore { fixture in
            let db = try ProtectedDatabase(atPath: "b.db", in: fixture.store, create: true, protection: .completeUnlessOpen)
            try db.execute("CREATE TABLE t(x INTEGER)")
            try fixture.device.lock()
            try db.execute("INSERT INTO t VALUES (1)")
            #expect(try db.query("SELECT count(*) FROM t").first?.values == [.integer(1)])
            db.close()
            expectCode(.protectedDataUnavailable) { _ = try ProtectedDatabase(atPath: "b.db", in: fixture.store) }
            let fresh = try ProtectedDatabase(atPath: "new/b2.db", in: fixture.store, create: true, protection: .completeUnlessOpen)
            try fresh.execute("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (42)")
            #expect(try fresh.query("SELECT x FROM t").first?.values == [.integer(42)])
            fresh.close()
            try fixture.unlock()
            #expect(try ProtectedDatabase(atPath: "new/b2.db", in: fixture.store).query("SELECT x FROM t").first?.values == [.integer(42)])
        }
    }

    @Test func aFlippedByteIsIntegrityFailureNeverAWrongRow() throws {
        try withDatabaseStore { fixture in
            let db = try ProtectedDatabase(atPath: "t.db", in: fixture.store, create: true, protection: .complete)
            try db.execute("CREATE TABLE t(x TEXT)")
            try db.execute("INSERT INTO t VALUES ('original')")
            db.close()
            let before = fixture.filesOnDisk()
            guard let (url, bytes) = before.filter({ $0.key.path.contains("/files/") }).max(by: { $0.value.count < $1.value.count }) else {
                Issue.record("no data file")
                return
            }
            var tampered = bytes
            tampered[tampered.count - 100] ^= 0x01
            try tampered.write(to: url)
            expectCode(.integrityFailure) {
                let again = try ProtectedDatabase(atPath: "t.db", in: fixture.store)
                _ = try again.query("SELECT x FROM t")
            }
        }
    }

    /// Regression: the VFS held its store strongly, so a store that had opened a database
    /// was never released and kept owning its directory (the next opener got storeBusy).
    @Test func aStoreWhoseDatabasesAreClosedIsReleased() throws {
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dpdb-\(UUID().uuidString.prefix(13))")
        defer { try? FileManager.default.removeItem(at: root) }
        weak var released: ProtectedStore?
        do {
            let store = try ProtectedStore(directory: root, configuration: DeviceConfiguration(passcodeCost: .minimal))
            try store.device.unlock()
            let db = try ProtectedDatabase(atPath: "a.db", in: store, create: true, journalMode: .wal)
            try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            db.close()
            released = store
        }
        #expect(released == nil, "the store outlived its last user")
        let again = try ProtectedStore(directory: root, configuration: DeviceConfiguration(passcodeCost: .minimal, ownershipTimeout: .zero))
        try again.device.unlock()
        #expect(try ProtectedDatabase(atPath: "a.db", in: again).query("SELECT x FROM t").first?.values == [.integer(1)])
    }
}

/// Rows as a newcomer reads them: by column name, and printed readably.
@Suite("SQLite rows")
struct SQLiteRowTests {
    @Test("a row's values by column name (any ASCII case) and by index; a readable description")
    func rowsByName() {
        let row = SQLiteRow(values: [.integer(1), .text("hello"), .null, .real(1.5), .blob(Data([1, 0xAB]))],
                            texts: ["1", "hello", nil, "1.5", nil], columns: ["id", "body", "note", "score", "raw"])
        #expect(row["body"] == .text("hello"))
        #expect(row["ID"] == .integer(1))
        #expect(row["missing"] == nil)
        #expect(row[3].doubleValue == 1.5)
        #expect(row["id"]?.integerValue == 1)
        #expect(row["body"]?.stringValue == "hello")
        #expect(row["note"]?.isNull == true)
        #expect(row["raw"]?.dataValue == Data([1, 0xAB]))
        #expect(row.description == #"[id: 1, body: "hello", note: NULL, score: 1.5, raw: x'01ab']"#)
        #expect("\(row)" == row.description)
    }
}
