import DataProtection
@testable import DataProtectionAgent
import DataProtectionSQLite
import Foundation
import Synchronization
import TestSupport
import Testing

/// A backup the agent makes holds the store at one instant, keychain items included: a
/// Secret Service client's change waits for it like a change through the agent's socket.
@Suite("Secret Service changes and the agent's backups", .serialized,
       .enabled(if: ["/usr/bin/dbus-daemon", "/usr/bin/secret-tool"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) },
                "needs dbus-daemon and secret-tool"))
struct SecretServiceBackupGateTests {
    @Test("secret-tool store made while the agent holds the store for a backup ends only after the backup")
    func createItemWaitsForTheSnapshot() throws {
        let bus = try PrivateBus()
        var configuration = AgentServer.Configuration(autoLock: nil)
        configuration.sessionBusAddress = bus.address
        configuration.servesSecretService = true
        let agent = try AgentFixture(configuration: configuration)
        defer { agent.tearDown() }
        try agent.device.unlock(passcode: "1234")

        // The backup's side: the store held for 1.5 s, the instant it lets go recorded.
        let held = DispatchSemaphore(value: 0)
        let released = Mutex<ContinuousClock.Instant?>(nil)
        let snapshotDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? agent.server.storeGate.snapshot(waitingUpTo: .seconds(5)) { () throws(DataProtectionError) in
                held.signal()
                Thread.sleep(forTimeInterval: 1.5)
                released.withLock { $0 = .now }
            }
            snapshotDone.signal()
        }
        #expect(held.wait(timeout: .now() + 5) == .success)

        let store = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/secret-tool"),
                                         ["store", "--label=during the backup", "service", "gate-test", "account", "a"],
                                         environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address],
                                         input: try Self.file(containing: "the secret"))
        let stored = ContinuousClock.now
        #expect(store.status == 0, "\(store.standardError)")
        #expect(snapshotDone.wait(timeout: .now() + 10) == .success)
        let end = try #require(released.withLock { $0 })
        #expect(stored > end, "the item was created while the backup held the store")
        #expect(try agent.store.keychain.items(matching: ["service": "gate-test"]).items.count == 1)
    }

    static func file(containing text: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("gate-\(UUID().uuidString)")
        try Data(text.utf8).write(to: url)
        return url
    }
}
