import DataProtection
import Foundation
import Testing

/// A client trusts only its own agent (issue 32): the socket's directory and the listener's
/// user are checked before a byte is sent; a fake agent of another user gets nothing.
@Suite("dpctl trusts only its own agent", .serialized)
struct AgentTrustTests {
    static let nobody: UInt32 = 65534
    static let socketActivate = "/usr/bin/systemd-socket-activate"
    /// A fake agent of another user needs root, `setpriv` and `systemd-socket-activate`.
    static let canImpersonate = getuid() == 0
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
        && FileManager.default.isExecutableFile(atPath: socketActivate)

    /// A listener of user `nobody` at `socket` that appends every byte it receives to
    /// `record` (`systemd-socket-activate --accept --inetd` running `cat` per connection).
    final class FakeAgent {
        let pid: Int32
        let record: URL

        init(socket: String, record: URL) throws {
            self.record = record
            _ = FileManager.default.createFile(atPath: record.path, contents: nil)
            chown(record.path, AgentTrustTests.nobody, AgentTrustTests.nobody)
            pid = try spawnDetached(["/usr/bin/setpriv", "--reuid", "\(AgentTrustTests.nobody)", "--regid", "\(AgentTrustTests.nobody)",
                                     "--clear-groups", AgentTrustTests.socketActivate, "-l", socket, "--accept", "--inetd",
                                     "/bin/sh", "-c", "exec cat >> '\(record.path)'"])
            // Listening once the socket exists.
            #expect(waitUntil { FileManager.default.fileExists(atPath: socket) }, "the fake agent did not start")
        }

        /// Every byte the fake agent received.
        var received: Data { (try? Data(contentsOf: record)) ?? Data() }

        func stop() {
            kill(pid, SIGKILL)
        }
    }

    /// A store and an `XDG_RUNTIME_DIR` for it.
    struct Setup {
        let fixture: StoreFixture
        let runtime: URL
        var environment: [String: String] { ["XDG_RUNTIME_DIR": runtime.path] }
        var socketDirectory: URL { runtime.appendingPathComponent("dpctl") }
        var socketPath: String {
            let identifier = (try? ProtectedStore.identifier(ofDataDirectory: fixture.store)) ?? nil
            return socketDirectory.appendingPathComponent("\(identifier ?? "none").sock").path
        }

        /// `runtimeMode`: the runtime directory's mode (1777: a shared, sticky one).
        init(runtimeMode: mode_t) throws {
            fixture = try StoreFixture()
            try fixture.initialize()
            // The fixture's directory is the test's temporary one; others must be able to enter it.
            chmod(fixture.directory.path, 0o755)
            runtime = fixture.directory.appendingPathComponent("runtime")
            try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true)
            chmod(runtime.path, runtimeMode)
        }

        func run(_ arguments: [String], input: URL? = nil, within seconds: Double = 30) throws -> TimedRun {
            try TimedRun(arguments, environment: fixture.environment(passcode: "1234", extra: environment), input: input, within: seconds)
        }
    }

    static func expectRefused(_ run: TimedRun, naming path: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!run.timedOut, "the client hung on the fake agent", sourceLocation: sourceLocation)
        #expect(run.status == 20, "exit \(run.status): \(run.standardError)", sourceLocation: sourceLocation)
        #expect(run.standardError.contains(path), "\(run.standardError)", sourceLocation: sourceLocation)
    }

    @Test("another user listening at the socket path (a shared XDG_RUNTIME_DIR) gets no byte: unlock and put exit notPermitted",
          .enabled(if: canImpersonate))
    func fakeAgentInSharedRuntimeDirectory() throws {
        let setup = try Setup(runtimeMode: 0o1777)
        // User nobody makes the socket's directory in the shared runtime directory and listens there.
        try FileManager.default.createDirectory(at: setup.socketDirectory, withIntermediateDirectories: false)
        chown(setup.socketDirectory.path, Self.nobody, Self.nobody)
        chmod(setup.socketDirectory.path, 0o755)
        let fake = try FakeAgent(socket: setup.socketPath, record: setup.socketDirectory.appendingPathComponent("received"))
        defer { fake.stop() }

        let unlock = try setup.run(["unlock"])
        Self.expectRefused(unlock, naming: setup.socketDirectory.path)
        let input = try setup.fixture.localFile("report.txt", Data("quarterly figures\n".utf8))
        let put = try setup.run(["put", input.path, "report.txt"])
        Self.expectRefused(put, naming: setup.socketDirectory.path)
        #expect(fake.received.isEmpty, "the fake agent received \(fake.received.count) bytes")
    }

    @Test("another user's listener put in a safe directory (its socket moved there) is refused on SO_PEERCRED: no byte sent",
          .enabled(if: canImpersonate))
    func fakeAgentOfAnotherUserInSafeDirectory() throws {
        let setup = try Setup(runtimeMode: 0o700)
        try FileManager.default.createDirectory(at: setup.socketDirectory, withIntermediateDirectories: false)
        chmod(setup.socketDirectory.path, 0o700)
        // Nobody listens in a directory of its own; the socket is then moved where the client looks.
        let elsewhere = setup.fixture.directory.appendingPathComponent("nobody")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: false)
        chown(elsewhere.path, Self.nobody, Self.nobody)
        let fake = try FakeAgent(socket: elsewhere.appendingPathComponent("agent.sock").path,
                                 record: elsewhere.appendingPathComponent("received"))
        defer { fake.stop() }
        #expect(rename(elsewhere.appendingPathComponent("agent.sock").path, setup.socketPath) == 0)

        let unlock = try setup.run(["unlock"])
        Self.expectRefused(unlock, naming: setup.socketPath)
        #expect(unlock.standardError.contains("user \(Self.nobody)"), "\(unlock.standardError)")
        let input = try setup.fixture.localFile("report.txt", Data("quarterly figures\n".utf8))
        Self.expectRefused(try setup.run(["put", input.path, "report.txt"]), naming: setup.socketPath)
        #expect(fake.received.isEmpty, "the fake agent received \(fake.received.count) bytes")
    }

    @Test("the own agent's socket in a directory others can write is refused (notPermitted, the directory named)")
    func socketDirectoryWritableByOthers() throws {
        let setup = try Setup(runtimeMode: 0o700)
        let started = try setup.run(["agent", "start", "--auto-lock", "never", "--grace", "0s"])
        #expect(started.status == 0, "\(started.standardError)")
        let pid = Int32(started.standardOutput.split(separator: " ").dropFirst(3).first?.trimmingCharacters(in: .punctuationCharacters) ?? "") ?? 0
        defer { if pid > 0 { kill(pid, SIGKILL) } }
        #expect(try setup.run(["status"]).status == 0)

        chmod(setup.socketDirectory.path, 0o777)
        Self.expectRefused(try setup.run(["status"]), naming: setup.socketDirectory.path)
        chmod(setup.socketDirectory.path, 0o700)
        // A runtime directory others can write, not sticky: they could swap the socket's directory.
        chmod(setup.runtime.path, 0o777)
        Self.expectRefused(try setup.run(["status"]), naming: setup.runtime.path)
        chmod(setup.runtime.path, 0o700)
        #expect(try setup.run(["agent", "stop"]).status == 0)
    }
}

/// A `dpctl` run that is killed if it has not ended within a bound: its status (-1 when
/// killed), output, and how long it took.
struct TimedRun {
    var status: Int32
    var standardOutput: String
    var standardError: String
    var elapsed: Duration
    var timedOut: Bool

    init(_ arguments: [String], environment: [String: String], input: URL? = nil, wrapper: [String] = [], within seconds: Double) throws {
        let process = Process()
        if let program = wrapper.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = Array(wrapper.dropFirst()) + [DPCtlRunner.executable.path] + arguments
        } else {
            process.executableURL = DPCtlRunner.executable
            process.arguments = arguments
        }
        process.environment = environment
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = try input.map { try FileHandle(forReadingFrom: $0) } ?? FileHandle.nullDevice
        let start = ContinuousClock.now
        try process.run()
        // Threads of their own: blocking reads on the global queue's few threads could starve
        // the other tests' (and this run's wait).
        let done = DispatchSemaphore(value: 0)
        let outputRead = DispatchSemaphore(value: 0)
        let errorRead = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var outputData = Data()
        nonisolated(unsafe) var errorData = Data()
        Thread.detachNewThread {
            outputData = output.fileHandleForReading.readDataToEndOfFile()
            outputRead.signal()
        }
        Thread.detachNewThread {
            errorData = error.fileHandleForReading.readDataToEndOfFile()
            errorRead.signal()
        }
        Thread.detachNewThread {
            process.waitUntilExit()
            done.signal()
        }
        timedOut = done.wait(timeout: .now() + seconds) == .timedOut
        if timedOut {
            kill(process.processIdentifier, SIGKILL)
            done.wait()
        }
        elapsed = ContinuousClock.now - start
        // A detached child (`agent start`) may keep the pipes a moment longer; not forever.
        _ = outputRead.wait(timeout: .now() + 10)
        _ = errorRead.wait(timeout: .now() + 10)
        status = timedOut ? -1 : process.terminationStatus
        standardOutput = String(decoding: outputData, as: UTF8.self)
        standardError = String(decoding: errorData, as: UTF8.self)
    }
}

/// Waits up to `seconds` for `condition`.
func waitUntil(seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.02)
    }
    return try condition()
}

/// Starts `arguments` in the background of a shell that exits at once, and returns its pid: the
/// process is then no child of the test's (Foundation's `Process` keeps one thread for every
/// child it watches, and one that lives long stalls the waits for the others).
func spawnDetached(_ arguments: [String], environment: [String: String]? = nil) throws -> Int32 {
    let quoted = arguments.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", quoted + " </dev/null >/dev/null 2>&1 & echo $!"]
    if let environment { process.environment = environment }
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
        throw CocoaError(.executableLoad)
    }
    return pid
}

/// Whether `pid` is alive and not a zombie.
func isAlive(_ pid: Int32) -> Bool {
    guard kill(pid, 0) == 0 else { return false }
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return false }
    return !stat[close...].hasPrefix(") Z")
}
