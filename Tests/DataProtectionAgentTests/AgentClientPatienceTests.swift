import DataProtection
import DataProtectionAgent
import Foundation
import SocketBridge
import Testing

/// A client's patience with a silent agent (issue 32).
@Suite("Agent client patience")
struct AgentClientPatienceTests {
    @Test("a listener that never answers the hello fails the client within its hello bound, naming the pid and socket")
    func silentListener() throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dpsilent-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("agent.sock").path
        let listener = try UnixSocket.listen(at: path)
        defer { listener.close() }
        let start = ContinuousClock.now
        do {
            _ = try AgentStore(socketPath: path, patience: AgentPatience(hello: .seconds(1), silence: .seconds(2)))
            Issue.record("a client was made without a hello")
        } catch {
            #expect(error.code == .ioFailure, "\(error)")
            #expect(error.message.contains("pid \(getpid())") && error.message.contains(path), "\(error.message)")
        }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(5), "gave up after \(elapsed)")
    }
}
