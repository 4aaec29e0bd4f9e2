import DataProtection
import DataProtectionAgent
import Foundation
import Testing

/// A store with passcode 1234 (booted, not unlocked) served by an ``AgentServer`` on a
/// thread of the test process, with its socket in a directory of its own.
final class AgentFixture: @unchecked Sendable {
    let root: URL
    let store: ProtectedStore
    let server: AgentServer
    var device: Device { store.device }
    var socketPath: String { server.socketPath }
    private let finished = DispatchSemaphore(value: 0)

    init(autoLock: Duration? = nil, grace: Duration = .zero, maximumConnections: Int = 1024,
         configuration: AgentServer.Configuration? = nil) throws {
        root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dpagent-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        store = try ProtectedStore(creatingAt: root.appendingPathComponent("store"), passcode: "1234", clock: SystemClock.shared,
                                   configuration: DeviceConfiguration(gracePeriod: grace, passcodeCost: .minimal))
        server = try AgentServer(store: store, socketPath: root.appendingPathComponent("run/agent.sock").path,
                                 configuration: configuration ?? AgentServer.Configuration(autoLock: autoLock, maximumConnections: maximumConnections))
        let server = server
        let finished = finished
        Thread.detachNewThread {
            server.run()
            finished.signal()
        }
    }

    /// A new client.
    func client() throws -> AgentStore {
        try AgentStore(socketPath: socketPath)
    }

    /// Stops the agent (waiting for it) and removes the directory.
    func tearDown() {
        server.stop()
        _ = finished.wait(timeout: .now() + 30)
        try? FileManager.default.removeItem(at: root)
    }
}

/// Runs `body` with a fresh agent, stopped and removed afterwards.
func withAgent<R>(autoLock: Duration? = nil, grace: Duration = .zero, _ body: (AgentFixture) throws -> R) throws -> R {
    let fixture = try AgentFixture(autoLock: autoLock, grace: grace)
    defer { fixture.tearDown() }
    return try body(fixture)
}

/// Expects `body` to throw a ``DataProtectionError`` with `code`.
func expectCode(_ code: DataProtectionError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected \(code.rawValue), got success", sourceLocation: sourceLocation)
    } catch let error as DataProtectionError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code.rawValue), got \(error)", sourceLocation: sourceLocation)
    }
}

/// Waits up to `seconds` for `condition`.
func eventually(seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.02)
    }
    return try condition()
}
