import DataProtection
import DataProtectionSQLite
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Crash safety through SQLite: `CrashWorker … sqlite` commits transactions on a
/// protected database and is killed with SIGKILL at a random instant, again and again on
/// the same store. After each kill the database must open, pass `PRAGMA integrity_check`,
/// hold every acknowledged transaction whole, and hold the one in flight whole or not at all.
///
/// `DP_SQLITE_KILLS` (default 30) sets the number of kills; `DP_CRASH_SEED` the seed.
@Suite("Crash safety through SQLite (SIGKILL harness)")
struct SQLiteCrashHarnessTests {
    /// The built `CrashWorker` beside the test bundle.
    static var worker: URL? {
        let candidates = [Bundle.main.bundleURL, URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
        for directory in candidates {
            for base in [directory, directory.deletingLastPathComponent()] {
                let url = base.appendingPathComponent("CrashWorker")
                if FileManager.default.isExecutableFile(atPath: url.path) { return url }
            }
        }
        return nil
    }

    /// Runs the worker, kills it `delay` ms after its READY line, and returns the complete lines it wrote.
    static func runAndKill(_ worker: URL, directory: URL, seed: UInt64, delay: Int, mode: String = "sqlite") throws -> (lines: [String], killed: Bool) {
        let process = Process()
        process.executableURL = worker
        process.arguments = [directory.path, String(seed), "1234", mode]
        let output = Pipe()
        process.standardOutput = output
        // A pipe, never a FileHandle on a file: Process closes the descriptors it is given, and
        // the handle's own close would then close whatever another test opened in between.
        let errors = Pipe()
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let reader = output.fileHandleForReading
        var received = Data()
        let ready = Data("READY\n".utf8)
        let deadline = Date().addingTimeInterval(30)
        while !received.starts(with: ready), Date() < deadline {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            received.append(chunk)
        }
        usleep(useconds_t(delay * 1_000))
        let killed = process.isRunning
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        received.append(reader.readDataToEndOfFile())
        var lines = String(decoding: received, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.removeLast()  // cut by the kill, or empty after the last newline
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        if !killed { lines.append("stderr: " + errorText) }
        return (lines, killed && process.terminationReason == .uncaughtSignal)
    }

    /// A new store with the passcode 1234, in a temporary folder named after the harness and its seed.
    static func harnessStore(_ prefix: String, seed: UInt64) throws -> URL {
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("\(prefix)-\(seed)-\(UUID().uuidString.prefix(6))")
        let store = try ProtectedStore(directory: root, configuration: DeviceConfiguration(passcodeCost: .minimal))
        try store.device.unlock()
        try store.device.setPasscode("1234")
        return root
    }

    /// The rows of each transaction in the worker's table; `nil` when the table is not there.
    static func rowsByTransaction(in database: ProtectedDatabase) throws -> [Int64: Int]? {
        guard try database.query("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'row'")
            .first?.values.first == .integer(1) else { return nil }
        var found: [Int64: Int] = [:]
        for row in try database.query("SELECT tx, count(*) FROM row GROUP BY tx") {
            if case .integer(let tx) = row.values[0], case .integer(let count) = row.values[1] { found[tx] = Int(count) }
        }
        return found
    }

    @Test("SIGKILL during SQLite transactions: integrity_check ok, every acknowledged transaction whole, none half applied")
    func killsDuringTransactions() throws {
        let worker = try #require(Self.worker, "CrashWorker is not built next to the tests")
        let environment = ProcessInfo.processInfo.environment
        let kills = environment["DP_SQLITE_KILLS"].flatMap(Int.init) ?? 30
        let seed = environment["DP_CRASH_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...999_999)
        print("SQLITE-CRASH-HARNESS seed \(seed), \(kills) kills")
        var random = SystemRandomNumberGenerator()
        let root = try Self.harnessStore("dpsk", seed: seed)
        defer { try? FileManager.default.removeItem(at: root) }
        var acknowledged: [Int64: Int] = [:]
        var totals = (transactions: 0, inFlight: 0, inFlightKept: 0)
        for round in 0..<kills {
            let roundSeed = seed &* 1_000_003 &+ UInt64(round)
            let run = try Self.runAndKill(worker, directory: root, seed: roundSeed, delay: Int.random(in: 20...400, using: &random))
            let context = "seed \(seed) round \(round) (worker seed \(roundSeed), \(roundSeed % 2 == 1 ? "WAL" : "rollback journal"))"
            try #require(run.killed, "\(context): the worker ended by itself: \(run.lines.suffix(3))")
            var inFlight: (tx: Int64, rows: Int)?
            for line in run.lines {
                let words = line.split(separator: " ")
                if words.first == "B", words.count == 4, let tx = Int64(words[2]), let rows = Int(words[3]) {
                    inFlight = (tx, rows)
                } else if line == "A", let done = inFlight {
                    acknowledged[done.tx] = done.rows
                    inFlight = nil
                    totals.transactions += 1
                }
            }

            let store = try ProtectedStore(directory: root, configuration: DeviceConfiguration(passcodeCost: .minimal))
            try store.device.unlock(passcode: "1234")
            let database = try ProtectedDatabase(atPath: "/db/app.db", in: store)
            #expect(try database.query("PRAGMA integrity_check").first?.texts == ["ok"], "\(context)")
            let found = try #require(try Self.rowsByTransaction(in: database), "\(context): the worker's table is missing")
            var expected = acknowledged
            if let inFlight {
                totals.inFlight += 1
                if found[inFlight.tx] != nil {
                    expected[inFlight.tx] = inFlight.rows  // committed just before the kill: whole
                    acknowledged[inFlight.tx] = inFlight.rows
                    totals.inFlightKept += 1
                }
            }
            #expect(found == expected, "\(context): transactions lost, half applied or invented")
            database.close()
            guard found == expected else { return }
        }
        print("SQLITE-CRASH-HARNESS seed \(seed): \(kills) kills survived, \(totals.transactions) acknowledged transactions, \(totals.inFlight) kills inside a transaction (\(totals.inFlightKept) of them committed); integrity_check ok every time, 0 lost, 0 half applied")
    }

    /// Where `CrashWorker … sqlite-move` keeps its database, in turn (its `movingPlaces`).
    static let movingPlaces = ["/db/app.db", "/db/moved.db", "/dbm/moved.db", "/dbm/app.db"]

    /// The `sqlite-move` worker moves its database (its file, or its directory) while the
    /// connection is open, before its first write and between transactions, and is killed at
    /// a random instant. After each kill the database is found at the place of its last move
    /// (or of the move in flight), opens, passes `integrity_check`, holds every acknowledged
    /// transaction whole; and once it is open nothing is left at an old place: the store holds
    /// the database's directory only, and it the database and its side files only.
    ///
    /// `DP_SQLITE_MOVE_KILLS` (default 16) sets the number of kills; `DP_CRASH_SEED` the seed.
    @Test("SIGKILL during SQLite transactions on a database moved while open: none lost, nothing at an old place")
    func killsWhileMoving() throws {
        let worker = try #require(Self.worker, "CrashWorker is not built next to the tests")
        let environment = ProcessInfo.processInfo.environment
        let kills = environment["DP_SQLITE_MOVE_KILLS"].flatMap(Int.init) ?? 16
        let seed = environment["DP_CRASH_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...999_999)
        print("SQLITE-MOVE-HARNESS seed \(seed), \(kills) kills")
        var random = SystemRandomNumberGenerator()
        let root = try Self.harnessStore("dpsm", seed: seed)
        defer { try? FileManager.default.removeItem(at: root) }
        var acknowledged: [Int64: Int] = [:]
        var place = 0
        var totals = (transactions: 0, moves: 0, movesInFlight: 0)
        for round in 0..<kills {
            // Both journal modes, each moved before its first write and not (the worker's seed bits 0 and 1).
            let roundSeed = (seed &* 1_000_003 &+ UInt64(round)) & ~3 | UInt64(round % 4)
            let run = try Self.runAndKill(worker, directory: root, seed: roundSeed, delay: Int.random(in: 20...400, using: &random), mode: "sqlite-move")
            let context = "seed \(seed) round \(round) (worker seed \(roundSeed), \(roundSeed % 2 == 1 ? "WAL" : "rollback journal"), \(roundSeed & 2 != 0 ? "moved before its first write" : "moved between transactions"))"
            try #require(run.killed, "\(context): the worker ended by itself: \(run.lines.suffix(3))")
            var inFlight: (tx: Int64, rows: Int)?
            var moveInFlight = false
            for line in run.lines {
                let words = line.split(separator: " ")
                if words.first == "B", words.count == 4, words[1] == "tx", let tx = Int64(words[2]), let rows = Int(words[3]) {
                    inFlight = (tx, rows)
                } else if words.first == "B", words.count == 4, words[1] == "mv" {
                    moveInFlight = true
                } else if line == "A", moveInFlight {
                    moveInFlight = false
                    place = (place + 1) % Self.movingPlaces.count
                    totals.moves += 1
                } else if line == "A", let done = inFlight {
                    acknowledged[done.tx] = done.rows
                    inFlight = nil
                    totals.transactions += 1
                }
            }

            let store = try ProtectedStore(directory: root, configuration: DeviceConfiguration(passcodeCost: .minimal))
            try store.device.unlock(passcode: "1234")
            if moveInFlight {
                totals.movesInFlight += 1
                let next = (place + 1) % Self.movingPlaces.count
                if store.fileExists(atPath: Self.movingPlaces[next]) { place = next }
            }
            let path = Self.movingPlaces[place]
            try #require(store.fileExists(atPath: path), "\(context): the database is not at \(path)")
            // Opened first: a move cut by the kill leaves a side file a second name, which the
            // database's first connection clears.
            let database = try ProtectedDatabase(atPath: path, in: store)
            let parts = path.split(separator: "/").map(String.init)
            #expect(try store.contentsOfDirectory(atPath: "/") == [parts[0]], "\(context): something is left at an old place")
            let beside = Set(try store.contentsOfDirectory(atPath: parts[0]))
            #expect(beside.isSubset(of: [parts[1], parts[1] + "-journal", parts[1] + "-wal"]) && beside.contains(parts[1]),
                    "\(context): \(parts[0]) holds \(beside.sorted())")
            #expect(try database.query("PRAGMA integrity_check").first?.texts == ["ok"], "\(context)")
            // The worker says READY before its CREATE TABLE (so that a move can come before the first
            // write): a kill that early leaves no table, which is right only while nothing was acknowledged.
            let found = try Self.rowsByTransaction(in: database) ?? [:]
            var expected = acknowledged
            if let inFlight, found[inFlight.tx] != nil {
                expected[inFlight.tx] = inFlight.rows  // committed just before the kill: whole
                acknowledged[inFlight.tx] = inFlight.rows
            }
            #expect(found == expected, "\(context): transactions lost, half applied or invented")
            database.close()
            guard found == expected else { return }
        }
        print("SQLITE-MOVE-HARNESS seed \(seed): \(kills) kills survived, \(totals.transactions) acknowledged transactions, \(totals.moves) moves (\(totals.movesInFlight) cut by the kill); integrity_check ok every time, 0 lost, nothing at an old place")
    }
}
