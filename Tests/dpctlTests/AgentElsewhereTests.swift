import Foundation
import Testing

/// An agent started on another socket (`DPCTL_AGENT_SOCKET`) owns the store: a command that
/// looks at the usual socket says so at once, instead of waiting 30 s for the store.
@Suite("An agent on another socket")
struct AgentElsewhereTests {
    @Test("a client that finds the store served on another socket fails at once with storeBusy, naming the agent's pid, socket and the variable to set")
    func saysWhereTheAgentIs() throws {
        let elsewhere = FileManager.default.temporaryDirectory.appendingPathComponent("dpctl-elsewhere-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let socket = elsewhere.appendingPathComponent("agent.sock").path
        let agent = try AgentCommandTests.AgentFixture(["--auto-lock", "never"], extra: ["DPCTL_AGENT_SOCKET": socket])
        defer { agent.stop() }

        let clock = ContinuousClock()
        let began = clock.now
        let status = try agent.fixture.run(["status"], passcode: nil)
        #expect(clock.now - began < .seconds(5), "it waited for the store the agent owns")
        #expect(status.status == 25, "\(status.standardError)")
        #expect(status.standardError.contains("pid \(agent.pid)") && status.standardError.contains(socket), "\(status.standardError)")
        #expect(status.standardError.contains("DPCTL_AGENT_SOCKET=\(socket)"), "\(status.standardError)")

        // With the variable, the same command goes through that agent.
        let through = try agent.run(["status"])
        #expect(through.status == 0, "\(through.standardError)")
    }
}
