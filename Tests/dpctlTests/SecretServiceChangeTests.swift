import Foundation
import Synchronization
import Testing

/// What the Secret Service provider tells and keeps of changes made around it: the
/// collection's signals for changes made through the agent's socket (`dpctl item`), and no
/// secret left in the agent's memory after the lock, whichever way it came in.
@Suite("Secret Service provider: changes and memory", .serialized,
       .enabled(if: SecretServiceClients.available, "needs dbus-daemon, secret-tool, dbus-monitor and Debian's python3 with secretstorage"))
struct SecretServiceChangeTests {
    /// A private session bus and an agent serving the Secret Service on it (unlocked, grace 0).
    static func agent() throws -> (bus: SessionBusFixture, agent: AgentCommandTests.AgentFixture, environment: [String: String]) {
        let bus = try SessionBusFixture(system: false, session: true)
        let busEnvironment = ["DBUS_SESSION_BUS_ADDRESS": bus.sessionAddress]
        let agent = try AgentCommandTests.AgentFixture(["--auto-lock", "never", "--grace", "0s", "--secret-service"], extra: busEnvironment)
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        return (bus, agent, agent.fixture.environment(passcode: "1234", extra: busEnvironment))
    }

    @Test("dpctl item add, update and rm through the agent raise ItemCreated, ItemChanged and ItemDeleted on the collection")
    func signalsForSocketChanges() throws {
        let (bus, agent, _) = try Self.agent()
        defer { agent.stop() }
        let monitor = Process()
        monitor.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-monitor")
        monitor.arguments = ["--address", bus.sessionAddress, "type='signal',interface='org.freedesktop.Secret.Collection'"]
        let capture = Pipe()
        monitor.standardOutput = capture
        monitor.standardError = FileHandle.nullDevice
        try monitor.run()
        Thread.sleep(forTimeInterval: 0.5)

        let secret = try agent.fixture.localFile("secret.txt", Data("signalled secret".utf8))
        let added = try agent.run(["item", "add", "--service", "signals.example", "--account", "ann"], input: secret)
        #expect(added.status == 0, "\(added.standardError)")
        let id = added.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(id.count == 32, "\(added.standardOutput)")
        let updated = try agent.run(["item", "update", "--id", id, "--label", "renamed"])
        #expect(updated.status == 0, "\(updated.standardError)")
        let other = try agent.run(["item", "add", "--attr", "app=other", "--accessibility", "afterFirstUnlock"], input: secret)
        #expect(other.status == 0, "\(other.standardError)")
        let otherID = other.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        let removed = try agent.run(["item", "rm", "--id", id])
        #expect(removed.status == 0, "\(removed.standardError)")

        // The signals follow the changes within moments; wait for the last one.
        let path = "/org/freedesktop/secrets/collection/keychain/\(id)"
        let captured = Mutex("")
        let reader = Thread {
            let handle = capture.fileHandleForReading
            while true {
                let data = handle.availableData
                if data.isEmpty { return }
                captured.withLock { $0 += String(decoding: data, as: UTF8.self) }
            }
        }
        reader.start()
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline, !captured.withLock({ $0.contains("member=ItemDeleted") }) { Thread.sleep(forTimeInterval: 0.1) }
        kill(monitor.processIdentifier, SIGKILL)
        monitor.waitUntilExit()
        while !reader.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        let text = captured.withLock { $0 }

        // One signal per change, in order, each naming the item.
        let signals = text.components(separatedBy: "\nsignal ").dropFirst().compactMap { block -> (String, String)? in
            guard let member = block.range(of: "member=").map({ block[$0.upperBound...].prefix { $0 != "\n" && $0 != " " } }),
                  let object = block.range(of: "object path \"").map({ block[$0.upperBound...].prefix { $0 != "\"" } }) else { return nil }
            return (String(member), String(object))
        }
        let expected = [("ItemCreated", path), ("ItemChanged", path),
                        ("ItemCreated", "/org/freedesktop/secrets/collection/keychain/\(otherID)"), ("ItemDeleted", path)]
        #expect(signals.map { "\($0.0) \($0.1)" } == expected.map { "\($0.0) \($0.1)" }, "\(text)")
    }
}
