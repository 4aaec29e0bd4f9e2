import Foundation
import Synchronization
import TestSupport
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

    @Test("after the lock (grace 0), no secret added through the socket or by a Secret Service client (plain and dh), and read back, is in the agent's memory")
    func noSecretInTheAgentAfterTheLock() throws {
        guard getuid() == 0 else { return }  // reading another process's memory takes root (CI runs as root)
        let (bus, agent, environment) = try Self.agent()
        defer { agent.stop(); withExtendedLifetime(bus) {} }
        let seed = String(UInt64.random(in: 1 << 60..<UInt64.max), radix: 36)
        let needles = ["socket", "plain", "dh"].map { "ZQK\(seed)-\($0)-KQZ" }

        let file = try agent.fixture.localFile("secret.txt", Data(needles[0].utf8))
        let added = try agent.run(["item", "add", "--service", "memory.example", "--account", "socket"], input: file)
        #expect(added.status == 0, "\(added.standardError)")
        try? FileManager.default.removeItem(at: file)
        let got = try agent.run(["item", "get", "--service", "memory.example", "--account", "socket"])
        #expect(got.status == 0 && got.standardOutput == needles[0], "\(got.standardError)")

        let script = agent.fixture.directory.appendingPathComponent("memory-client.py")
        try Self.memoryClient.write(to: script, atomically: true, encoding: .utf8)
        for (algorithm, needle) in [("plain", needles[1]), ("dh", needles[2])] {
            let python = try SecretServiceTests.client("/usr/bin/python3", [script.path, algorithm], input: Data(needle.utf8), environment: environment)
            #expect(python.status == 0 && python.text == "ok\n", "\(algorithm): \(python.text) \(python.error)")
        }

        let before = try needles.map { try ProcessMemory.copies(of: $0, inProcess: agent.pid).count }
        #expect(before.reduce(0, +) > 0, "positive control: the secrets are in the agent's page cache (\(before))")
        #expect(try agent.run(["lock"]).status == 0)
        let after = try needles.map { try ProcessMemory.copies(of: $0, inProcess: agent.pid) }
        print("agent item memory scan: copies before the lock \(before), after \(after.map(\.count)), \(after.first?.bytes ?? 0) bytes scanned")
        #expect(after.allSatisfy { $0.bytes > 1 << 20 })
        #expect(after.map(\.count) == [0, 0, 0], "socket, plain, dh")
    }

    /// Creates an item with the secret read from standard input over a session of the
    /// algorithm given (`plain` or `dh`), reads it back, closes the session; prints `ok`.
    static let memoryClient = """
        import sys
        import secretstorage
        from secretstorage.dhcrypto import Session
        from secretstorage.util import DBusAddressWrapper
        from secretstorage.defines import SS_PATH, SS_PREFIX, ALGORITHM_DH, ALGORITHM_PLAIN
        algorithm = sys.argv[1]
        secret = sys.stdin.buffer.read()
        conn = secretstorage.dbus_init()
        service = DBusAddressWrapper(SS_PATH, SS_PREFIX + "Service", conn)
        session = Session()
        if algorithm == "plain":
            output, path = service.call("OpenSession", "sv", ALGORITHM_PLAIN, ("s", ""))
            session.encrypted = False
        else:
            output, path = service.call("OpenSession", "sv", ALGORITHM_DH, ("ay", session.my_public_key.to_bytes(128, "big")))
            session.set_server_public_key(int.from_bytes(output[1], "big"))
        session.object_path = path
        collection = secretstorage.Collection(conn, "/org/freedesktop/secrets/aliases/default", session=session)
        item = collection.create_item("memory " + algorithm, {"memory": algorithm}, secret)
        assert item.get_secret() == secret
        DBusAddressWrapper(path, SS_PREFIX + "Session", conn).call("Close", "")
        conn.close()
        print("ok")
        """
}
