import Foundation
import Testing

/// `dpctl backup create|restore|verify` on the real binary, in one process and through the
/// agent, with the real `age` and `tar`.
@Suite("dpctl backup")
struct BackupCommandTests {
    /// An age key pair from `age-keygen`: the identity file (0600) and the recipient.
    static func keyPair(in fixture: StoreFixture) throws -> (identity: URL, recipient: String) {
        let file = fixture.directory.appendingPathComponent("key-\(UUID().uuidString).txt")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/age-keygen")
        process.arguments = ["-o", file.path]
        let error = Pipe()
        process.standardError = error
        try process.run()
        let text = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return (file, text.split(separator: " ").last!.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// A second store (another device directory, passcode 5678) next to `fixture`'s.
    static func secondStore(_ fixture: StoreFixture) -> [String: String] {
        ["DPCTL_STORE": fixture.directory.appendingPathComponent("second").path,
         "DPCTL_DEVICE": fixture.directory.appendingPathComponent("second-device").path]
    }

    /// Every class, nested directories and a database with rows.
    static func populate(_ run: ([String]) throws -> DPCtlRunner.Result, _ fixture: StoreFixture) throws {
        for protectionClass in ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication", "completeWhenUserInactive", "none"] {
            #expect(try run(["mkdir", "-p", "c/\(protectionClass)/deeper", "--class", protectionClass]).status == 0)
            let file = try fixture.localFile("f-\(protectionClass)", Data("file of \(protectionClass)\n".utf8))
            #expect(try run(["put", file.path, "c/\(protectionClass)/deeper/file", "--class", protectionClass]).status == 0)
        }
        let big = try fixture.localFile("big", deterministicBytes(count: 5 << 20))
        #expect(try run(["put", big.path, "big", "--class", "complete"]).status == 0)
        #expect(try run(["sql", "db.sqlite", "--create", "--class", "complete",
                         "CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3);"]).status == 0)
    }

    @Test("one process: create (-o, --json), verify lists classes, age -d | tar -x gives the files, restore on a second device under its own passcode; a second restore is fileExists (15)")
    func oneProcess() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        try Self.populate({ try fixture.run($0) }, fixture)
        let (identity, recipient) = try Self.keyPair(in: fixture)
        let archive = fixture.directory.appendingPathComponent("backup.age")
        let created = try fixture.run(["backup", "create", "-r", recipient, "-o", archive.path, "--json"])
        #expect(created.status == 0, "\(created.standardError)")
        #expect(try created.json()["files"] as? Int == 7)
        let verified = try fixture.run(["backup", "verify", archive.path, "-i", identity.path], passcode: nil)
        #expect(verified.status == 0, "\(verified.standardError)")
        #expect(verified.standardOutput.contains("- complete") && verified.standardOutput.contains("c/complete/deeper/file"))
        // Without dpctl.
        let out = fixture.directory.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", "age -d -i '\(identity.path)' '\(archive.path)' | tar -x -C '\(out.path)'"]
        try shell.run()
        shell.waitUntilExit()
        #expect(shell.terminationStatus == 0)
        #expect(try Data(contentsOf: out.appendingPathComponent("big")) == deterministicBytes(count: 5 << 20))
        #expect(try String(contentsOf: out.appendingPathComponent("c/none/deeper/file"), encoding: .utf8) == "file of none\n")
        // Restore on a second device.
        let second = Self.secondStore(fixture)
        #expect(try fixture.run(["init"], passcode: "5678", extra: second).status == 0)
        let restored = try fixture.run(["backup", "restore", archive.path, "-i", identity.path], passcode: "5678", extra: second)
        #expect(restored.status == 0, "\(restored.standardError)")
        #expect(try fixture.run(["cat", "c/complete/deeper/file"], passcode: "5678", extra: second).standardOutput == "file of complete\n")
        let stat = try fixture.run(["stat", "c/completeWhenUserInactive/deeper/file", "--json"], passcode: "5678", extra: second)
        #expect(stat.standardOutput.contains("completeWhenUserInactive"))
        #expect(try fixture.run(["sql", "db.sqlite", "SELECT sum(x) FROM t"], passcode: "5678", extra: second).standardOutput == "6\n")
        let big = fixture.directory.appendingPathComponent("big-restored")
        #expect(try fixture.run(["get", "big", "-o", big.path], passcode: "5678", extra: second).status == 0)
        #expect(try Data(contentsOf: big) == deterministicBytes(count: 5 << 20))
        // The old passcode does not open the second device.
        #expect(try fixture.run(["cat", "c/complete/deeper/file"], passcode: "1234", extra: second).status == 11)
        #expect(try fixture.run(["backup", "restore", archive.path, "-i", identity.path], passcode: "5678", extra: second).status == 15)
    }

    @Test("a passphrase archive round-trips through dpctl ($DPCTL_BACKUP_PASSPHRASE and --passphrase-file); a wrong passphrase is integrityFailure (21)")
    func passphrase() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let file = try fixture.localFile("f", Data("passphrase protected\n".utf8))
        #expect(try fixture.run(["put", file.path, "f", "--class", "complete"]).status == 0)
        let archive = fixture.directory.appendingPathComponent("p.age")
        let created = try fixture.run(["backup", "create", "--passphrase", "--work-factor", "12", "-o", archive.path],
                                      extra: ["DPCTL_BACKUP_PASSPHRASE": "long passphrase"])
        #expect(created.status == 0, "\(created.standardError)")
        let second = Self.secondStore(fixture)
        #expect(try fixture.run(["init"], passcode: "5678", extra: second).status == 0)
        let wrong = try fixture.run(["backup", "restore", archive.path, "--passphrase"], passcode: "5678",
                                    extra: second.merging(["DPCTL_BACKUP_PASSPHRASE": "wrong"]) { $1 })
        #expect(wrong.status == 21, "\(wrong.standardError)")
        let passphraseFile = try fixture.passcodeFile("phrase", Data("long passphrase\n".utf8))
        let restored = try fixture.run(["backup", "restore", archive.path, "--passphrase-file", passphraseFile.path], passcode: "5678", extra: second)
        #expect(restored.status == 0, "\(restored.standardError)")
        #expect(try fixture.run(["cat", "f"], passcode: "5678", extra: second).standardOutput == "passphrase protected\n")
    }

    @Test("through the agent: no passcode asked; backup while complete is locked exits 10 and writes no archive; restore into the agent's empty store")
    func throughAgent() throws {
        let agent = try AgentCommandTests.AgentFixture()
        defer { agent.stop() }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        try Self.populate({ try agent.run($0) }, agent.fixture)
        let (identity, recipient) = try Self.keyPair(in: agent.fixture)
        let archive = agent.fixture.directory.appendingPathComponent("agent.age")
        let created = try agent.run(["backup", "create", "-r", recipient, "-o", archive.path])
        #expect(created.status == 0, "\(created.standardError)")
        #expect(try agent.run(["lock"]).status == 0)
        let lockedArchive = agent.fixture.directory.appendingPathComponent("locked.age")
        let locked = try agent.run(["backup", "create", "-r", recipient, "-o", lockedArchive.path])
        #expect(locked.status == 10, "\(locked.standardError)")
        #expect(locked.standardError.contains("big (complete)"))
        #expect(!FileManager.default.fileExists(atPath: lockedArchive.path))
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        // Into a second store served by its own agent.
        let second = Self.secondStore(agent.fixture)
        #expect(try agent.fixture.run(["init"], passcode: "5678", extra: second).status == 0)
        let otherAgent = try AgentCommandTests.AgentFixture.serving(agent.fixture, extra: second)
        defer { otherAgent.stop() }
        #expect(try agent.fixture.run(["unlock"], passcode: "5678", extra: second).status == 0)
        let restored = try agent.fixture.run(["backup", "restore", archive.path, "-i", identity.path], passcode: nil, extra: second)
        #expect(restored.status == 0, "\(restored.standardError)")
        #expect(try agent.fixture.run(["sql", "db.sqlite", "SELECT count(*) FROM t"], passcode: nil, extra: second).standardOutput == "3\n")
    }

    @Test("to standard output and back from standard input; a flipped byte: verify and restore exit 21 and the target stays empty")
    func pipesAndTampering() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let file = try fixture.localFile("f", deterministicBytes(count: 300_000))
        #expect(try fixture.run(["put", file.path, "f", "--class", "complete"]).status == 0)
        let (identity, recipient) = try Self.keyPair(in: fixture)
        let archive = fixture.directory.appendingPathComponent("piped.age")
        let created = try fixture.run(["backup", "create", "-r", recipient], outputFile: archive)
        #expect(created.status == 0, "\(created.standardError)")
        var bytes = try Data(contentsOf: archive)
        let second = Self.secondStore(fixture)
        #expect(try fixture.run(["init"], passcode: "5678", extra: second).status == 0)
        bytes[bytes.count - 70_000] ^= 0x04
        let tampered = try fixture.localFile("tampered.age", bytes)
        #expect(try fixture.run(["backup", "verify", tampered.path, "-i", identity.path], passcode: nil).status == 21)
        let refused = try fixture.run(["backup", "restore", "-", "-i", identity.path], passcode: "5678", input: tampered, extra: second)
        #expect(refused.status == 21, "\(refused.standardError)")
        #expect(try fixture.run(["ls"], passcode: "5678", extra: second).standardOutput.isEmpty)
        let restored = try fixture.run(["backup", "restore", "-", "-i", identity.path], passcode: "5678", input: archive, extra: second)
        #expect(restored.status == 0, "\(restored.standardError)")
        let out = fixture.directory.appendingPathComponent("f-restored")
        #expect(try fixture.run(["get", "f", "-o", out.path], passcode: "5678", extra: second).status == 0)
        #expect(try Data(contentsOf: out) == deterministicBytes(count: 300_000))
    }

    @Test("backup while another process writes (one transaction per command, both tables together): every archive holds a consistent database")
    func concurrentWriter() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        #expect(try fixture.run(["sql", "pair.db", "--create", "--class", "complete",
                                 "PRAGMA journal_mode=WAL; CREATE TABLE a(v); CREATE TABLE b(v); INSERT INTO a VALUES (0); INSERT INTO b VALUES (0);"]).status == 0)
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/bin/sh")
        let stop = fixture.directory.appendingPathComponent("stop")
        writer.arguments = ["-c", "while [ ! -e '\(stop.path)' ]; do '\(DPCtlRunner.executable.path)' sql pair.db 'BEGIN; UPDATE a SET v = v + 1; UPDATE b SET v = v + 1; COMMIT;' >/dev/null 2>&1; done"]
        writer.environment = fixture.environment(passcode: "1234")
        writer.standardOutput = FileHandle.nullDevice
        writer.standardError = FileHandle.nullDevice
        try writer.run()
        defer {
            // The loop ends after its current command: nothing is left running.
            _ = FileManager.default.createFile(atPath: stop.path, contents: nil)
            writer.waitUntilExit()
        }
        let (identity, recipient) = try Self.keyPair(in: fixture)
        var seen: Set<String> = []
        for round in 0..<3 {
            usleep(300_000)
            let archive = fixture.directory.appendingPathComponent("c\(round).age")
            let created = try fixture.run(["backup", "create", "-r", recipient, "-o", archive.path])
            #expect(created.status == 0, "\(created.standardError)")
            let target = ["DPCTL_STORE": fixture.directory.appendingPathComponent("c\(round)").path,
                          "DPCTL_DEVICE": fixture.directory.appendingPathComponent("c\(round)-device").path]
            #expect(try fixture.run(["init"], extra: target).status == 0)
            #expect(try fixture.run(["backup", "restore", archive.path, "-i", identity.path], extra: target).status == 0)
            let values = try fixture.run(["sql", "pair.db", "SELECT (SELECT v FROM a), (SELECT v FROM b)"], extra: target).standardOutput
            let pair = values.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|")
            #expect(pair.count == 2 && pair[0] == pair[1], "round \(round): \(values)")
            seen.insert(values)
        }
        print("concurrent writer: the archives held \(seen.sorted())")
    }

    @Test("dpctl bench --backup-only: create and restore of 256 MiB measured against tar | age; each adds at most 64 MiB to its process's peak resident set")
    func memory() throws {
        let result = try DPCtlRunner.run(["bench", "--backup-only", "--size", "256MiB", "--rounds", "1", "--json", "--quiet"])
        #expect(result.status == 0, "\(result.standardError)")
        let rows = try #require(try result.json()["rows"] as? [[String: Any]])
        #expect(rows.count == 3)
        for row in rows.prefix(2) { #expect((row["ratio"] as? Double ?? 0) > 0, "\(row)") }
        let memory = try #require(rows.last)
        #expect(memory["met"] as? Bool == true, "\(memory)")
        print("backup bench (debug build): \(rows.map { "\($0["what"] ?? "") \($0["store"] ?? "") vs \($0["baseline"] ?? "")" })")
    }

    @Test("kill harness: a restore killed at random instants leaves the target empty or complete")
    func killedRestore() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        for index in 0..<40 {
            let file = try fixture.localFile("f\(index)", deterministicBytes(count: 200_000 + index, seed: UInt64(index + 1)))
            #expect(try fixture.run(["put", file.path, "d\(index % 4)/f\(index)", "--class", index.isMultiple(of: 2) ? "complete" : "none"]).status == 0)
        }
        let (identity, recipient) = try Self.keyPair(in: fixture)
        let archive = fixture.directory.appendingPathComponent("k.age")
        #expect(try fixture.run(["backup", "create", "-r", recipient, "-o", archive.path]).status == 0)
        let complete = try fixture.run(["ls", "-l", "d3"]).standardOutput
        // How long a whole restore takes here: the kills are spread over it, and past it.
        let timed = ["DPCTL_STORE": fixture.directory.appendingPathComponent("timed").path,
                     "DPCTL_DEVICE": fixture.directory.appendingPathComponent("timed-device").path]
        #expect(try fixture.run(["init"], extra: timed).status == 0)
        let start = ContinuousClock.now
        #expect(try fixture.run(["backup", "restore", archive.path, "-i", identity.path], extra: timed).status == 0)
        let duration = ContinuousClock.now - start
        var outcomes: [String: Int] = [:]
        for round in 0..<8 {
            let target = ["DPCTL_STORE": fixture.directory.appendingPathComponent("t\(round)").path,
                          "DPCTL_DEVICE": fixture.directory.appendingPathComponent("t\(round)-device").path]
            #expect(try fixture.run(["init"], extra: target).status == 0)
            let process = Process()
            process.executableURL = DPCtlRunner.executable
            process.arguments = ["backup", "restore", archive.path, "-i", identity.path, "--quiet"]
            process.environment = fixture.environment(passcode: "1234", extra: target)
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let fraction = 0.15 + Double(round) * 0.1
            usleep(UInt32(duration / .microseconds(1) * fraction))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let listing = try fixture.run(["ls"], extra: target)
            #expect(listing.status == 0, "\(listing.standardError)")
            let killed = process.terminationReason == .uncaughtSignal
            if listing.standardOutput.isEmpty {
                #expect(killed, "round \(round): the restore ended and left nothing")
                outcomes["empty", default: 0] += 1
            } else {
                #expect(listing.standardOutput == "d0/\nd1/\nd2/\nd3/\n", "round \(round): \(listing.standardOutput)")
                #expect(try fixture.run(["ls", "-l", "d3"], extra: target).standardOutput == complete)
                outcomes["complete", default: 0] += 1
            }
        }
        #expect(outcomes.values.reduce(0, +) == 8, "\(outcomes)")
        print("kill harness over restore (killed at 15 % to 85 % of a whole restore's \(duration)): \(outcomes)")
    }
}
