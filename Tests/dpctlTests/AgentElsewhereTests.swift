import Foundation
import Testing

/// An agent started on another socket (`DPCTL_AGENT_SOCKET`) owns the store: a command that
/// looks at the usual socket says so at once, instead of waiting 30 s for the store.
@Suite("An agent on another socket")
struct AgentElsewhereTests {
    @Test("a client that finds the store served on another socket fails at once with storeBusy, naming the agent's pid, socket and the variable to set")
    func saysWhereTheAgentIs() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let elsewhere = fixture.directory.appendingPathComponent("elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let socket = elsewhere.appendingPathComponent("agent.sock").path
        let started = try fixture.run(["agent", "start", "--auto-lock", "never"], passcode: nil, extra: ["DPCTL_AGENT_SOCKET": socket])
        #expect(started.status == 0, "\(started.standardError)")
        let pid = Int32(started.standardOutput.split(separator: " ").dropFirst(3).first?.trimmingCharacters(in: .punctuationCharacters) ?? "") ?? 0
        defer {
            _ = try? fixture.run(["agent", "stop"], passcode: nil, extra: ["DPCTL_AGENT_SOCKET": socket])
            if pid > 0, kill(pid, 0) == 0 { kill(pid, SIGKILL) }
        }
        #expect(pid > 0)

        let clock = ContinuousClock()
        let began = clock.now
        let status = try fixture.run(["status"], passcode: nil)
        #expect(clock.now - began < .seconds(5), "it waited for the store the agent owns")
        #expect(status.status == 25, "\(status.standardError)")
        #expect(status.standardError.contains("pid \(pid)") && status.standardError.contains(socket), "\(status.standardError)")
        #expect(status.standardError.contains("DPCTL_AGENT_SOCKET=\(socket)"), "\(status.standardError)")

        // With the variable, the same command goes through that agent.
        let through = try fixture.run(["status"], passcode: nil, extra: ["DPCTL_AGENT_SOCKET": socket])
        #expect(through.status == 0, "\(through.standardError)")
    }
}
