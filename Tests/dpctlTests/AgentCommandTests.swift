import Foundation
import Testing

/// `dpctl agent` on the real binary: one owner serving every dpctl command of its user.
@Suite("dpctl agent")
struct AgentCommandTests {
    /// A store with passcode 1234 and its agent; stopped (or killed) at the end.
    final class AgentFixture {
        let fixture: StoreFixture
        private(set) var pid: Int32 = 0

        /// Every run's environment beyond the fixture's (`DPCTL_AGENT_SOCKET`, say).
        let extra: [String: String]

        init(_ options: [String] = ["--auto-lock", "never", "--grace", "0s"], extra: [String: String] = [:]) throws {
            fixture = try StoreFixture()
            self.extra = extra
            try fixture.initialize()
            try start(options)
        }

        /// A store of its own, served by an agent (unlocked) when `throughAgent`.
        static func store(throughAgent: Bool) throws -> (fixture: StoreFixture, agent: AgentFixture?) {
            guard throughAgent else {
                let fixture = try StoreFixture()
                try fixture.initialize()
                return (fixture, nil)
            }
            let agent = try AgentFixture()
            #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
            return (agent.fixture, agent)
        }

        /// An agent for the existing store of `fixture` that `extra` names (`DPCTL_STORE`, `DPCTL_DEVICE`).
        static func serving(_ fixture: StoreFixture, extra: [String: String]) throws -> AgentFixture {
            try AgentFixture(fixture: fixture, extra: extra)
        }

        private init(fixture: StoreFixture, extra: [String: String]) throws {
            self.fixture = fixture
            self.extra = extra
            try start(["--auto-lock", "never", "--grace", "0s"])
        }

        func start(_ options: [String] = ["--auto-lock", "never", "--grace", "0s"]) throws {
            let started = try run(["agent", "start"] + options)
            #expect(started.status == 0, "\(started.standardError)")
            #expect(started.standardOutput.hasPrefix("Agent started: pid "))
            pid = Int32(started.standardOutput.split(separator: " ").dropFirst(3).first?.trimmingCharacters(in: .punctuationCharacters) ?? "") ?? 0
            #expect(pid > 0)
        }

        /// Runs `dpctl` with no passcode source (the agent needs none) unless one is given.
        @discardableResult
        func run(_ arguments: [String], passcode: String? = nil, input: URL? = nil, extra: [String: String] = [:]) throws -> DPCtlRunner.Result {
            try fixture.run(arguments, passcode: passcode, input: input, extra: self.extra.merging(extra) { $1 })
        }

        func stop() {
            if pid > 0, kill(pid, 0) == 0 { _ = try? run(["agent", "stop"]) }
            if pid > 0, kill(pid, 0) == 0 { kill(pid, SIGKILL) }
        }

        deinit { stop() }
    }

    @Test("start, unlock once, 100 gets with no passcode; lock: complete fails (exit 10), class C still reads; stop")
    func unlockOnceThenWork() throws {
        let agent = try AgentFixture()
        defer { agent.stop() }
        let secret = try agent.fixture.localFile("secret.txt", Data("top secret\n".utf8))
        // Locked before the first unlock: a complete file cannot even be created.
        let early = try agent.run(["put", secret.path, "secret", "--class", "complete"])
        #expect(early.status == 10)
        #expect(early.standardError.contains("run `dpctl unlock`"))
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        #expect(try agent.run(["put", secret.path, "secret", "--class", "complete"]).status == 0)
        #expect(try agent.run(["put", secret.path, "everyday"]).status == 0)
        for round in 0..<100 {
            let result = try agent.run(["get", round.isMultiple(of: 2) ? "secret" : "everyday"])
            guard result.status == 0, result.standardOutput == "top secret\n" else {
                Issue.record("get \(round): \(result.status) \(result.standardError)")
                return
            }
        }
        let status = try agent.run(["status", "--json"])
        #expect(status.standardOutput.contains("\"state\" : \"unlocked\""))
        #expect(status.standardOutput.contains("\"pid\" : \(agent.pid)"))
        #expect(try agent.run(["lock"]).status == 0)
        let locked = try agent.run(["cat", "secret"])
        #expect(locked.status == 10)
        #expect(locked.standardError.contains("(protectedDataUnavailable)"))
        #expect(locked.standardError.contains("dpctl: hint: The agent's device is locked for this class: run `dpctl unlock`."))
        let everyday = try agent.run(["cat", "everyday"])
        #expect(everyday.status == 0 && everyday.standardOutput == "top secret\n")
        #expect(try agent.run(["status"]).standardOutput.contains("state: locked"))
        let stopped = try agent.run(["agent", "stop"])
        #expect(stopped.status == 0 && stopped.standardOutput.contains("Stopped the agent (pid \(agent.pid))"))
        #expect(kill(agent.pid, 0) != 0 || Self.isZombie(agent.pid))
        // Without the agent: one-shot again, asking for the passcode.
        #expect(try agent.run(["status"]).standardOutput.contains("agent: none"))
        #expect(try agent.run(["cat", "secret"]).status == 10)
        #expect(try agent.run(["cat", "secret"], passcode: "1234").standardOutput == "top secret\n")
    }

    static func isZombie(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return false }
        return stat[close...].hasPrefix(") Z")
    }

    @Test("auto-lock fires after the configured idle time")
    func autoLock() throws {
        let agent = try AgentFixture(["--auto-lock", "2s", "--grace", "0s"])
        defer { agent.stop() }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        #expect(try agent.run(["status"]).standardOutput.contains("state: unlocked"))
        let deadline = Date(timeIntervalSinceNow: 15)
        var state = ""
        while Date() < deadline {
            state = try agent.run(["status", "--json"]).standardOutput
            if state.contains("\"state\" : \"locked\"") { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        #expect(state.contains("\"state\" : \"locked\""))
        #expect(state.contains("\"autoLockSeconds\" : 2"))
    }

    @Test("watch prints the notifications in order")
    func watch() throws {
        let agent = try AgentFixture()
        defer { agent.stop() }
        let watcher = Process()
        watcher.executableURL = DPCtlRunner.executable
        watcher.arguments = ["watch"]
        watcher.environment = agent.fixture.environment(passcode: nil, extra: ["DPCTL_WATCH_READY": "1"])
        let output = Pipe()
        let error = Pipe()
        watcher.standardOutput = output
        watcher.standardError = error
        watcher.standardInput = FileHandle.nullDevice
        try watcher.run()
        defer { if watcher.isRunning { watcher.terminate() } }
        // Wait for "watching" on standard error: events before it would not be seen.
        var ready = Data()
        while !String(decoding: ready, as: UTF8.self).contains("watching"), case let chunk = error.fileHandleForReading.availableData, !chunk.isEmpty {
            ready.append(chunk)
        }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        #expect(try agent.run(["lock"]).status == 0)
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        var received = Data()
        while String(decoding: received, as: UTF8.self).split(separator: "\n").count < 3,
              case let chunk = output.fileHandleForReading.availableData, !chunk.isEmpty {
            received.append(chunk)
        }
        let lines = String(decoding: received, as: UTF8.self).split(separator: "\n")
        #expect(lines.map { $0.split(separator: " ").last.map(String.init) ?? "" } == [
            "protectedDataDidBecomeAvailable", "protectedDataWillBecomeUnavailable", "protectedDataDidBecomeAvailable",
        ])
        #expect(lines.allSatisfy { $0.first?.isNumber == true })  // an ISO 8601 time first
    }

    @Test("without an agent: lock and watch say to start one; agent stop finds none and succeeds (twice); a second agent start is storeBusy")
    func withoutAgent() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        for command in [["lock"], ["watch"]] {
            let result = try fixture.run(command, passcode: nil)
            #expect(result.status == 23, "\(command)")
            #expect(result.standardError.contains("dpctl agent start"))
        }
        // Nothing to stop is no failure (as `systemctl stop`): exit 0 with a note, every time.
        for _ in 0..<2 {
            let none = try fixture.run(["agent", "stop"], passcode: nil)
            #expect(none.status == 0, "\(none.standardError)")
            #expect(none.standardOutput.contains("No agent serves this store: nothing to stop."))
        }
        let agent = try AgentFixture()
        defer { agent.stop() }
        let second = try agent.run(["agent", "start"])
        #expect(second.status == 25)
        #expect(second.standardError.contains("pid \(agent.pid)"))
    }

    @Test("dpctl sql runs in the agent: no passcode while unlocked, exit 10 once a complete database is locked; scripts and rows larger than a frame")
    func sqlThroughTheAgent() throws {
        let agent = try AgentFixture()
        defer { agent.stop() }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        let created = try agent.run(["sql", "db", "--create", "--class", "complete",
                                     "create table t(x); insert into t values (1), (2.5), ('a'), (NULL), (1e20); select * from t"])
        #expect(created.status == 0, "\(created.standardError)")
        #expect(created.standardOutput == "1\n2.5\na\n\n1.0e+20\n")
        let json = try agent.run(["sql", "db", "--json", "select x from t where x = 'a'"])
        #expect(json.standardOutput == "[{\"x\":\"a\"}]\n")  // as sqlite3's .mode json prints it
        let broken = try agent.run(["sql", "db", "select nope from t"])
        #expect(broken.status == 26)
        #expect(try agent.run(["stat", "--json", "db"]).standardOutput.contains("\"protectionClass\" : \"complete\""))
        #expect(try agent.run(["lock"]).status == 0)
        let locked = try agent.run(["sql", "db", "select count(*) from t"])
        #expect(locked.status == 10)
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        #expect(try agent.run(["sql", "db", "select count(*) from t"]).standardOutput == "5\n")
        // A script larger than a frame (1 MiB), one transaction across its pieces, and rows larger than one.
        var script = "BEGIN;\n"
        for row in 1...12_000 { script += "insert into t values ('\(String(repeating: "r", count: 100)) \(row)');\n" }
        script += "COMMIT;\nselect count(*) from t;\n"
        let file = try agent.fixture.localFile("big.sql", Data(script.utf8))
        let big = try agent.run(["sql", "db"], input: file)
        #expect(big.status == 0, "\(big.standardError)")
        #expect(big.standardOutput == "12005\n")
        let all = try agent.run(["sql", "db", "select x from t order by rowid"])
        #expect(all.status == 0, "\(all.standardError)")
        #expect(all.standardOutput.utf8.count > 1 << 20)
        #expect(all.standardOutput.split(separator: "\n").count == 12_004)  // the NULL row prints as an empty line
    }

    @Test("the agent cannot be read through /proc/<pid>/mem by a process of its own user",
          .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func nonDumpable() throws {
        // Capability-less processes of one user (ProcessProtectionTests): a dumpable one is the control.
        let control = try ProcessProtectionTests.capless(["/bin/sleep", "30"])
        defer { control.terminate() }
        Thread.sleep(forTimeInterval: 0.2)
        #expect(try ProcessProtectionTests.memoryOpens(control.processIdentifier), "the control process should be readable")

        let fixture = try StoreFixture()
        try fixture.initialize()
        let output = Pipe()
        let start = try ProcessProtectionTests.capless([DPCtlRunner.executable.path, "agent", "start", "--auto-lock", "never"],
                                                       environment: fixture.environment(passcode: nil), output: output)
        let line = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        start.waitUntilExit()
        let pid = Int32(line.split(separator: " ").dropFirst(3).first?.trimmingCharacters(in: .punctuationCharacters) ?? "") ?? 0
        #expect(pid > 0, "\(line)")
        defer { _ = try? fixture.run(["agent", "stop"], passcode: nil) }
        #expect(try !ProcessProtectionTests.memoryOpens(pid), "a same-user process opened the agent's memory")
        #expect(try ProcessProtectionTests.coreLimitIsZero(pid))
    }

    @Test("through the agent, a closed pipe (cat big | head -c 10) ends quietly with status 0")
    func closedPipe() throws {
        let agent = try AgentFixture()
        defer { agent.stop() }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        let big = try agent.fixture.localFile("big", Data(repeating: 7, count: 8 << 20))
        #expect(try agent.run(["put", big.path, "big"]).status == 0)
        let result = try DPCtlRunner.readingThenClosing(10, ["cat", "big"], environment: agent.fixture.environment(passcode: nil))
        #expect(result.read == 10)
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty, "\(result.standardError)")
    }

    @Test("a client killed mid-transfer stores nothing and leaves the agent serving")
    func clientKilledMidTransfer() throws {
        let agent = try AgentFixture()
        defer { agent.stop() }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        let put = try OwnershipTests.Background(["put", "-", "big"], environment: agent.fixture.environment(passcode: nil), keepInputOpen: true)
        try put.input.fileHandleForWriting.write(contentsOf: Data(repeating: 9, count: 5 << 20))
        kill(put.process.processIdentifier, SIGKILL)
        put.process.waitUntilExit()
        // The agent still holds the pipe: its end now comes after its client is gone.
        try put.input.fileHandleForWriting.close()
        Thread.sleep(forTimeInterval: 0.3)
        let listing = try agent.run(["ls"])
        #expect(listing.status == 0)
        #expect(!listing.standardOutput.contains("big"))
        let small = try agent.fixture.localFile("small", Data("ok".utf8))
        #expect(try agent.run(["put", small.path, "small"]).status == 0)
        #expect(try agent.run(["cat", "small"]).standardOutput == "ok")
    }

    @Test("the agent SIGKILLed under load loses no acknowledged put")
    func agentKilledUnderLoad() throws {
        let agent = try AgentFixture()
        defer { agent.stop() }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        var acknowledged: [Int: Data] = [:]
        for round in 0..<3 {
            let stop = Date(timeIntervalSinceNow: 0.4 + Double(round) * 0.3)
            var index = 0
            while Date() < stop {
                let body = Data("round \(round) file \(index) ".utf8) + Data(repeating: UInt8(index % 251), count: (index % 7) * 70_000)
                let local = try agent.fixture.localFile("in-\(round)-\(index)", body)
                if try agent.run(["put", local.path, "load/\(round)-\(index)"]).status == 0 { acknowledged[round * 10_000 + index] = body }
                index += 1
            }
            kill(agent.pid, SIGKILL)
            // One-shot, with the passcode: every acknowledged file is there, whole.
            for (key, body) in acknowledged {
                let result = try agent.run(["get", "load/\(key / 10_000)-\(key % 10_000)"], passcode: "1234")
                guard result.status == 0, Data(result.standardOutput.utf8) == body else {
                    Issue.record("acknowledged put \(key) lost after the agent was killed: \(result.standardError)")
                    return
                }
            }
            try agent.start()
            #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        }
        #expect(acknowledged.count >= 3)
    }

    @Test("3 processes × 10 rounds of concurrent puts through the agent, one path and distinct paths: all succeed")
    func concurrentPuts() throws {
        let agent = try AgentFixture()
        defer { agent.stop() }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        let environment = agent.fixture.environment(passcode: nil)
        for round in 0..<10 {
            let inputs = try (0..<3).map { try agent.fixture.localFile("p\(round)-\($0)", Data("r\(round)p\($0)".utf8)) }
            let runs = inputs.enumerated().flatMap { index, input in
                [["put", input.path, "same"], ["put", input.path, "own/\(round)-\(index)"]]
            }
            let results = try OwnershipTests.concurrently(runs, environments: Array(repeating: environment, count: runs.count))
            for result in results where result.status != 0 { Issue.record("round \(round): \(result.standardError)") }
            let same = try agent.run(["cat", "same"]).standardOutput
            #expect((0..<3).map { "r\(round)p\($0)" }.contains(same))
        }
        #expect(try agent.run(["ls", "own"]).standardOutput.split(separator: "\n").count == 30)
    }
}
