import DataProtection
import Foundation
import SocketBridge
import Testing

/// A bounded agent and patient clients (issue 32): clients never hang on a silent agent,
/// idle or half-sent connections cannot starve it, socket activation serves at once.
@Suite("dpctl agent: bounded agent, patient clients", .serialized)
struct AgentBoundsTests {
    /// A store (passcode 1234) and its agent, a real `dpctl agent start` process (started
    /// through `wrapper` when given); killed at the end.
    final class Agent {
        let fixture: StoreFixture
        let runtime: URL
        private(set) var pid: Int32 = 0
        var environment: [String: String] { fixture.environment(passcode: "1234", extra: ["XDG_RUNTIME_DIR": runtime.path]) }
        var socketPath: String {
            let identifier = (try? ProtectedStore.identifier(ofDataDirectory: fixture.store)) ?? nil
            return runtime.appendingPathComponent("dpctl/\(identifier ?? "none").sock").path
        }

        init(wrapper: [String] = [], start: Bool = true) throws {
            fixture = try StoreFixture()
            try fixture.initialize()
            runtime = fixture.directory.appendingPathComponent("runtime")
            try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true)
            chmod(runtime.path, 0o700)
            guard start else { return }
            let started = try DPCtlRunner.run(["agent", "start", "--auto-lock", "never", "--grace", "0s"],
                                              fullEnvironment: environment, wrapper: wrapper)
            #expect(started.status == 0, "\(started.standardError)")
            pid = Int32(started.standardOutput.split(separator: " ").dropFirst(3).first?.trimmingCharacters(in: .punctuationCharacters) ?? "") ?? 0
            #expect(pid > 0, "\(started.standardOutput)")
        }

        func run(_ arguments: [String], input: URL? = nil, within seconds: Double = 30) throws -> TimedRun {
            try TimedRun(arguments, environment: environment, input: input, within: seconds)
        }

        /// A kibibyte figure of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in MiB.
        func memory(_ field: String) -> Double {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
            return Double(line.split(separator: " ").dropFirst().first ?? "0").map { $0 / 1024 } ?? 0
        }

        func kill() {
            if pid > 0 {
                Glibc.kill(pid, SIGCONT)
                Glibc.kill(pid, SIGKILL)
            }
        }

        deinit { kill() }
    }

    /// A raw connection's hello (version 2), as `Keys/agent-protocol.md` §4 spells it.
    static let hello: [UInt8] = [0, 0, 0, 5, 1, 0, 0, 0, 2]

    /// Connects and says hello; the agent's answer must be `ok`.
    static func greeted(_ path: String) throws -> UnixSocket {
        let socket = try UnixSocket.connect(to: path, within: 5000)
        try socket.send(hello)
        var answer = [UInt8](repeating: 0, count: 4 + 9)
        var filled = 0
        while filled < answer.count {
            let count = try socket.receive(into: &answer, from: filled).count
            guard count > 0 else { break }
            filled += count
        }
        #expect(filled == answer.count && answer[4] == 0, "no ok to a hello: \(answer[..<filled])")
        return socket
    }

    @Test("a SIGSTOPped agent: `dpctl ls` and `dpctl agent stop` fail within 15 s, naming its pid and socket")
    func stoppedAgent() throws {
        let agent = try Agent()
        defer { agent.kill() }
        #expect(try agent.run(["ls"]).status == 0)
        kill(agent.pid, SIGSTOP)
        for command in [["ls"], ["agent", "stop"]] {
            let run = try agent.run(command, within: 40)
            #expect(!run.timedOut, "`dpctl \(command.joined(separator: " "))` hung on a stopped agent")
            #expect(run.elapsed < .seconds(15), "`dpctl \(command.joined(separator: " "))` took \(run.elapsed)")
            #expect(run.status == 24, "exit \(run.status): \(run.standardError)")
            #expect(run.standardError.contains("pid \(agent.pid)"), "\(run.standardError)")
            #expect(run.standardError.contains(agent.socketPath), "\(run.standardError)")
        }
        kill(agent.pid, SIGCONT)
        #expect(try agent.run(["agent", "stop"]).status == 0)
    }

    @Test("a client waits as long as the agent works: an unlock whose Argon2id takes seconds is not cut short")
    func longUnlockIsNotSilence() throws {
        // The passcode's cost is the store's; the default one takes about a second here. What is
        // checked: a stopped agent fails (above) while a busy one, showing no byte, does not.
        let agent = try Agent()
        defer { agent.kill() }
        let unlock = try agent.run(["unlock"])
        #expect(unlock.status == 0, "\(unlock.standardError)")
        #expect(try agent.run(["agent", "stop"]).status == 0)
    }

    @Test("with 1,100 connections open that never say hello, another client is served within 5 s (agent started at a soft limit of 1,024 descriptors)",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit")))
    func idleConnectionsDoNotStarve() throws {
        // The test itself holds the 1,100 connections.
        let limit = try DescriptorLimit.raiseToHardLimit()
        try #require(limit >= 4096, "the hard descriptor limit (\(limit)) is too low for this test")
        let agent = try Agent(wrapper: ["/usr/bin/prlimit", "--nofile=1024:4096"])
        defer { agent.kill() }
        var idle: [UnixSocket] = []
        defer { for socket in idle { socket.close() } }
        var refused = 0
        for _ in 0..<1100 {
            do {
                idle.append(try UnixSocket.connect(to: agent.socketPath, within: 3000))
            } catch {
                refused += 1
            }
        }
        let status = try agent.run(["status"], within: 20)
        print("a client behind 1,100 idle connections: served after \(status.elapsed) (\(refused) of them could not connect)")
        #expect(!status.timedOut, "a client hung behind 1,100 idle connections (\(refused) of them could not connect)")
        #expect(status.status == 0, "\(status.standardError)")
        #expect(status.elapsed < .seconds(5), "served after \(status.elapsed)")
        // The first idle connection is closed (hello timeout, or room made for others): its read ends.
        var buffer = [UInt8](repeating: 0, count: 16)
        let closed = try idle[0].waitUntilReadable(milliseconds: 8000)
        #expect(closed, "an idle connection was kept past the hello timeout")
        if closed { #expect((try? idle[0].receive(into: &buffer).count) ?? 0 == 0) }
        #expect(try agent.run(["agent", "stop"]).status == 0)
    }

    /// Resident sizes mean nothing under a sanitizer (shadow memory, quarantine): skipped there.
    @Test("300 connections that announce a 1 MiB frame and send 10 bytes keep the agent under 128 MiB resident",
          .enabled(if: ProcessInfo.processInfo.environment["DP_SANITIZER"] == nil, "resident sizes under a sanitizer"))
    func halfSentFramesStayCheap() throws {
        let agent = try Agent()
        defer { agent.kill() }
        let before = agent.memory("VmRSS")
        var connections: [UnixSocket] = []
        defer { for socket in connections { socket.close() } }
        for _ in 0..<300 {
            let socket = try Self.greeted(agent.socketPath)
            // A frame of 1 MiB announced (the most allowed is 1 MiB + 4 KiB), then 6 of its bytes.
            try socket.send([0x00, 0x10, 0x00, 0x00, 6, 0, 0, 0, 0, 0] as [UInt8])
            connections.append(socket)
        }
        Thread.sleep(forTimeInterval: 1)
        let resident = agent.memory("VmRSS")
        print("agent resident: \(before) MiB before, \(resident) MiB with 300 half-sent 1 MiB frames")
        #expect(resident > 0 && resident < 128, "the agent holds \(resident) MiB resident")
        // It still serves.
        #expect(try agent.run(["status"], within: 20).status == 0)
    }

    @Test("an unterminated SQL statement beyond 64 MiB is invalidArgument, and the agent's memory stays bounded",
          .enabled(if: ProcessInfo.processInfo.environment["DP_SANITIZER"] == nil, "resident sizes under a sanitizer"))
    func unterminatedStatementIsCapped() throws {
        let agent = try Agent()
        defer { agent.kill() }
        #expect(try agent.run(["unlock"]).status == 0)
        #expect(try agent.run(["sql", "--create", "db", "create table t(x)"]).status == 0)
        // An open string that never closes: 96 MiB of lines and no end.
        let script = agent.fixture.directory.appendingPathComponent("unterminated.sql")
        _ = FileManager.default.createFile(atPath: script.path, contents: Data("insert into t values('".utf8))
        let handle = try FileHandle(forWritingTo: script)
        try handle.seekToEnd()
        let line = Data((String(repeating: "x", count: 1023) + "\n").utf8)
        let block = Data((0..<1024).flatMap { _ in line })
        for _ in 0..<96 { try handle.write(contentsOf: block) }
        try handle.close()
        let before = agent.memory("VmHWM")
        let run = try agent.run(["sql", "db"], input: script, within: 120)
        let peak = agent.memory("VmHWM")
        print("agent peak resident: \(before) MiB before, \(peak) MiB after a 96 MiB unterminated statement")
        #expect(run.status == 23, "exit \(run.status): \(run.standardError)")
        #expect(run.standardError.contains("64 MiB"), "\(run.standardError)")
        #expect(peak < before + 96, "the agent's peak grew from \(before) to \(peak) MiB")
        #expect(try agent.run(["sql", "db", "select count(*) from t"]).standardOutput == "0\n")
    }

    @Test("`systemd-socket-activate -l <socket> dpctl agent start --foreground` serves clients on the inherited socket",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate")))
    func socketActivation() throws {
        let agent = try Agent(start: false)
        let directory = (agent.socketPath as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o700)
        // The agent starts at the first connection, with the store's variables passed on.
        let pid = try spawnDetached(["/usr/bin/systemd-socket-activate", "-l", agent.socketPath,
                                     "-E", "DPCTL_STORE", "-E", "XDG_STATE_HOME", "-E", "XDG_RUNTIME_DIR",
                                     DPCtlRunner.executable.path, "agent", "start", "--foreground", "--auto-lock", "never"],
                                    environment: agent.environment)
        defer { kill(pid, SIGKILL) }
        #expect(waitUntil { FileManager.default.fileExists(atPath: agent.socketPath) })
        let status = try agent.run(["status", "--json"], within: 20)
        #expect(!status.timedOut, "`dpctl status` hung on the socket-activated agent")
        #expect(status.status == 0, "\(status.standardError)")
        #expect(status.standardOutput.contains("\(pid)"), "the agent is not the activated process \(pid): \(status.standardOutput)")
        #expect(try agent.run(["unlock"]).status == 0)
        let stop = try agent.run(["agent", "stop"], within: 30)
        #expect(stop.status == 0, "\(stop.standardError)")
        #expect(waitUntil(seconds: 10) { !isAlive(pid) }, "the agent did not exit after stop")
    }
}
