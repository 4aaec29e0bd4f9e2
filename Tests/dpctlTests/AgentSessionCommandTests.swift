import TestSupport
import DataProtection
import Foundation
import Testing

/// `dpctl agent start --lock-with-session`, `status` and `watch` with the session (issue 35),
/// and the agent as a systemd service: socket activation with readiness, generated units.
@Suite("dpctl agent: the login session and systemd", .serialized)
struct AgentSessionCommandTests {
    /// A store (passcode 1234) and its runtime directory, for agents started with `extra` variables.
    final class Setup {
        let agent: AgentBoundsTests.Agent
        var extra: [String: String] = [:]
        var environment: [String: String] { agent.environment.merging(extra) { $1 } }

        init() throws {
            agent = try AgentBoundsTests.Agent(start: false)
        }

        func run(_ arguments: [String], within seconds: Double = 30) throws -> TimedRun {
            try TimedRun(arguments, environment: environment, within: seconds)
        }

        /// Starts `dpctl agent start …` (detached) and returns its pid.
        func start(_ options: [String]) throws -> (TimedRun, Int32) {
            let started = try run(["agent", "start", "--auto-lock", "never", "--grace", "0s"] + options)
            let pid = Int32(started.standardOutput.split(separator: " ").dropFirst(3).first?.trimmingCharacters(in: .punctuationCharacters) ?? "") ?? 0
            return (started, pid)
        }
    }

    @Test("--lock-with-session with no bus answering: the agent does not start (exit 24, a clear message); without the flag it starts")
    func noBus() throws {
        let setup = try Setup()
        setup.extra = ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/system", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/session"]
        let (refused, refusedPid) = try setup.start(["--lock-with-session"])
        if refusedPid > 0 { kill(refusedPid, SIGKILL) }
        #expect(refused.status == 24, "exit \(refused.status): \(refused.standardOutput) \(refused.standardError)")
        #expect(refused.standardError.contains("cannot follow the session"), "\(refused.standardError)")
        #expect(refused.standardError.contains("DBUS_SYSTEM_BUS_ADDRESS"), "\(refused.standardError)")
        let (started, pid) = try setup.start([])
        defer { if pid > 0 { kill(pid, SIGKILL) } }
        #expect(started.status == 0, "\(started.standardError)")
        let status = try setup.run(["status"])
        #expect(status.standardOutput.contains("session: not followed"), "\(status.standardOutput)")
        #expect(try setup.run(["agent", "stop"]).status == 0)
    }

    @Test("status says what of the session is followed; watch shows the session's lock and unlock; the device stays locked",
          .enabled(if: SessionBusFixture.available))
    func statusAndWatch() throws {
        let buses = try SessionBusFixture()
        let setup = try Setup()
        setup.extra = ["DBUS_SYSTEM_BUS_ADDRESS": buses.systemAddress, "DBUS_SESSION_BUS_ADDRESS": buses.sessionAddress,
                       "XDG_SESSION_ID": SessionBusFixture.sessionIdentifier]
        let (started, pid) = try setup.start(["--lock-with-session"])
        defer { if pid > 0 { kill(pid, SIGKILL) } }
        #expect(started.status == 0, "\(started.standardError)")
        #expect(try setup.run(["unlock"]).status == 0)
        let status = try setup.run(["status", "--json"])
        #expect(status.standardOutput.contains("login1 session c1"), "\(status.standardOutput)")
        #expect(status.standardOutput.contains("screensavers"), "\(status.standardOutput)")
        // `dpctl watch` in the background, its lines into a file.
        let lines = setup.agent.fixture.directory.appendingPathComponent("watch.txt")
        _ = FileManager.default.createFile(atPath: lines.path, contents: nil)
        let watch = Process()
        watch.executableURL = DPCtlRunner.executable
        watch.arguments = ["watch"]
        watch.environment = setup.environment.merging(["DPCTL_WATCH_READY": "1"]) { $1 }
        watch.standardOutput = try FileHandle(forWritingTo: lines)
        let ready = Pipe()
        watch.standardError = ready
        try watch.run()
        defer {
            kill(watch.processIdentifier, SIGKILL)
            watch.waitUntilExit()
        }
        #expect(ready.fileHandleForReading.availableData.count > 0, "watch never said it was watching")
        try buses.lockSession()
        #expect(waitUntil(seconds: 2) { (try? setup.run(["status"]).standardOutput.contains("state: locked")) == true })
        try buses.unlockSession()
        #expect(waitUntil(seconds: 5) { ((try? String(contentsOf: lines, encoding: .utf8)) ?? "").contains("sessionUnlocked") })
        let text = try String(contentsOf: lines, encoding: .utf8)
        let names = text.split(separator: "\n").compactMap { $0.split(separator: " ").dropFirst().first.map(String.init) }
        #expect(names == ["protectedDataWillBecomeUnavailable", "sessionLocked", "sessionUnlocked"], "\(text)")
        #expect(text.contains("sessionLocked (login1 Lock)"), "\(text)")
        #expect(try setup.run(["status"]).standardOutput.contains("state: locked"))
        #expect(try setup.run(["agent", "stop"]).status == 0)
    }

    @Test("without XDG_SESSION_ID the agent asks logind for its own session (GetSessionByPID) and follows it",
          .enabled(if: SessionBusFixture.available))
    func sessionByProcess() throws {
        let buses = try SessionBusFixture(session: false)
        // The template has no GetSessionByPID: the mock answers session c1 for any process.
        try buses.call(buses.systemAddress, "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.AddMethod",
                       ["org.freedesktop.login1.Manager", "GetSessionByPID", "u", "o", "ret = '\(SessionBusFixture.sessionPath)'"])
        let setup = try Setup()
        var environment = setup.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": buses.systemAddress,
                                                     "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/session"]) { $1 }
        environment.removeValue(forKey: "XDG_SESSION_ID")
        let started = try TimedRun(["agent", "start", "--auto-lock", "never", "--grace", "0s", "--lock-with-session"],
                                   environment: environment, within: 30)
        let pid = Int32(started.standardOutput.split(separator: " ").dropFirst(3).first?.trimmingCharacters(in: .punctuationCharacters) ?? "") ?? 0
        defer { if pid > 0 { kill(pid, SIGKILL) } }
        #expect(started.status == 0, "\(started.standardError)")
        #expect(try TimedRun(["unlock"], environment: environment, within: 30).status == 0)
        let status = try TimedRun(["status"], environment: environment, within: 30)
        #expect(status.standardOutput.contains("session: followed: login1 session c1 (system bus), login1 sleep (system bus)"),
                "\(status.standardOutput)")
        try buses.lockSession()
        #expect(waitUntil(seconds: 2) { (try? TimedRun(["status"], environment: environment, within: 30))?.standardOutput.contains("state: locked") == true })
        #expect(try TimedRun(["agent", "stop"], environment: environment, within: 30).status == 0)
    }

    @Test("systemd-socket-activate: the first connection starts the agent; NOTIFY_SOCKET hears READY=1, STATUS=, then STOPPING=1",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate")
                   && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")))
    func readinessNotification() throws {
        let setup = try Setup()
        let agent = setup.agent
        let directory = (agent.socketPath as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o700)
        // The service manager's side: a datagram socket that prints what it receives, one line per datagram.
        let notifySocket = agent.fixture.directory.appendingPathComponent("notify").path
        let listener = Process()
        listener.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        listener.arguments = ["-c", """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind(sys.argv[1])
            print("bound", flush=True)
            while True:
                print(s.recv(4096).decode().replace("\\n", "|"), flush=True)
            """, notifySocket]
        let heard = Pipe()
        listener.standardOutput = heard
        try listener.run()
        defer {
            kill(listener.processIdentifier, SIGKILL)
            listener.waitUntilExit()
        }
        let collected = Collected(heard.fileHandleForReading)
        #expect(waitUntil { collected.text.contains("bound") })
        let pid = try spawnDetached(["/usr/bin/systemd-socket-activate", "-l", agent.socketPath,
                                     "-E", "DPCTL_STORE", "-E", "XDG_STATE_HOME", "-E", "XDG_RUNTIME_DIR", "-E", "NOTIFY_SOCKET=\(notifySocket)",
                                     DPCtlRunner.executable.path, "agent", "start", "--foreground", "--auto-lock", "never"],
                                    environment: setup.environment)
        defer { kill(pid, SIGKILL) }
        #expect(waitUntil { FileManager.default.fileExists(atPath: agent.socketPath) })
        // Nothing before the first connection: the agent is not running yet.
        Thread.sleep(forTimeInterval: 0.3)
        #expect(!collected.text.contains("READY=1"), "\(collected.text)")
        let status = try setup.run(["status", "--json"], within: 20)
        #expect(status.status == 0, "\(status.standardError)")
        #expect(status.standardOutput.contains("\"pid\" : \(pid)"), "\(status.standardOutput)")
        #expect(waitUntil(seconds: 5) { collected.text.contains("READY=1") }, "\(collected.text)")
        #expect(try setup.run(["unlock"]).status == 0)
        #expect(waitUntil(seconds: 5) { collected.text.contains("STATUS=unlocked") }, "\(collected.text)")
        #expect(try setup.run(["agent", "stop"], within: 30).status == 0)
        #expect(waitUntil(seconds: 10) { !isAlive(pid) }, "the agent did not exit after stop")
        #expect(waitUntil(seconds: 5) { collected.text.contains("STOPPING=1") }, "\(collected.text)")
        let text = collected.text
        let ready = try #require(text.range(of: "READY=1"))
        let stopping = try #require(text.range(of: "STOPPING=1"))
        #expect(ready.lowerBound < stopping.lowerBound, "\(text)")
        #expect(text.contains("READY=1|STATUS=booted"), "\(text)")
    }

    @Test("agent systemd-units writes a socket and a notify service that systemd-analyze verify accepts (and rejects when broken)",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze")))
    func units() throws {
        let setup = try Setup()
        let output = setup.agent.fixture.directory.appendingPathComponent("units")
        let written = try setup.run(["agent", "systemd-units", "--output", output.path])
        #expect(written.status == 0, "\(written.standardError)")
        let service = try String(contentsOf: output.appendingPathComponent("dpctl-agent.service"), encoding: .utf8)
        let socket = try String(contentsOf: output.appendingPathComponent("dpctl-agent.socket"), encoding: .utf8)
        #expect(service.contains("Type=notify"))
        #expect(service.contains("ExecStart=\"\(DPCtlRunner.executable.resolvingSymlinksInPath().path)\" \"agent\" \"start\" \"--foreground\""),
                "\(service)")
        for directive in ["NoNewPrivileges=yes", "PrivateTmp=yes", "ProtectSystem=full", "MemoryDenyWriteExecute=yes", "LimitCORE=0"] {
            #expect(service.contains(directive), "\(directive)")
        }
        #expect(socket.contains("ListenStream=\(setup.agent.socketPath)"), "\(socket)")
        #expect(socket.contains("SocketMode=0600"))
        func verify(_ directory: URL) throws -> DPCtlRunner.Result {
            // `--user` needs a runtime directory even as root; the test's own serves.
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-analyze")
            process.arguments = ["--user", "verify", directory.appendingPathComponent("dpctl-agent.socket").path,
                                 directory.appendingPathComponent("dpctl-agent.service").path]
            process.environment = ["XDG_RUNTIME_DIR": setup.agent.runtime.path, "PATH": "/usr/bin:/bin"]
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return DPCtlRunner.Result(status: process.terminationStatus, standardOutput: String(decoding: data, as: UTF8.self), standardError: "")
        }
        let accepted = try verify(output)
        #expect(accepted.status == 0, "\(accepted.standardOutput)")
        #expect(accepted.standardOutput.isEmpty, "\(accepted.standardOutput)")
        // The check can fail: a unit whose program is missing is refused.
        let broken = setup.agent.fixture.directory.appendingPathComponent("broken")
        try FileManager.default.createDirectory(at: broken, withIntermediateDirectories: true)
        try socket.write(to: broken.appendingPathComponent("dpctl-agent.socket"), atomically: true, encoding: .utf8)
        try service.replacingOccurrences(of: "ExecStart=\"/", with: "ExecStart=\"/nonexistent/")
            .write(to: broken.appendingPathComponent("dpctl-agent.service"), atomically: true, encoding: .utf8)
        #expect(try verify(broken).status != 0)
        // Without --output: both printed.
        let printed = try setup.run(["agent", "systemd-units"])
        #expect(printed.standardOutput.contains("# dpctl-agent.socket") && printed.standardOutput.contains("# dpctl-agent.service"))
    }
}

/// Everything read from a pipe so far, gathered on a thread of its own.
final class Collected: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { return }
                lock.lock()
                data.append(chunk)
                lock.unlock()
            }
        }
    }

    var text: String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: data, as: UTF8.self)
    }
}
