import DataProtection
import Foundation
import Testing

/// A store in a scratch directory on a virtual clock, unlocked with passcode 1234 set.
final class DatabaseFixture {
    let root: URL
    let clock = VirtualClock()
    let store: ProtectedStore
    var device: Device { store.device }

    init(grace: Duration = .zero) throws {
        root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dpdb-\(UUID().uuidString.prefix(13))", isDirectory: true)
        store = try ProtectedStore(directory: root, clock: clock,
                                   configuration: DeviceConfiguration(gracePeriod: grace, passcodeCost: .minimal))
        try store.device.unlock()
        try store.device.setPasscode("1234")
    }

    func remove() { try? FileManager.default.removeItem(at: root) }

    func unlock() throws { try device.unlock(passcode: "1234") }

    /// Every regular file under the store's directory, with its bytes.
    func filesOnDisk() -> [URL: Data] {
        var result: [URL: Data] = [:]
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey]) else { return result }
        for case let url as URL in walker where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            result[url] = try? Data(contentsOf: url)
        }
        return result
    }
}

/// Runs `body` with a fresh fixture, removing its directory afterwards.
func withDatabaseStore<R>(grace: Duration = .zero, _ body: (DatabaseFixture) throws -> R) throws -> R {
    let fixture = try DatabaseFixture(grace: grace)
    defer { fixture.remove() }
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
