import DataProtection
import Foundation
import Logging
import Testing

/// The caller's logger (`DeviceConfiguration.logger`) gets what the device and its store log.
@Suite("Device logging")
struct DeviceLoggingTests {
    /// Keeps every record, at every level.
    final class Recorder: LogHandler, @unchecked Sendable {
        private let lock = NSLock()
        private var records: [(Logger.Level, String, String)] = []
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            lock.lock()
            records.append((event.level, "\(event.message)", "\(event.metadata ?? [:])"))
            lock.unlock()
        }

        var all: [(Logger.Level, String, String)] {
            lock.lock()
            defer { lock.unlock() }
            return records
        }
    }

    @Test("lock, unlock, failed attempts and key discards reach the injected logger, with no passcode in them")
    func injectedLogger() throws {
        let recorder = Recorder()
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dplog-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        var configuration = DeviceConfiguration(passcodeCost: .minimal)
        configuration.logger = Logger(label: "test") { _ in recorder }
        #expect(configuration == DeviceConfiguration(passcodeCost: .minimal))  // the logger is not part of the rules
        let store = try ProtectedStore(creatingAt: root, passcode: "secret-passcode", configuration: configuration)
        #expect(throws: DataProtectionError.self) { try store.device.unlock(passcode: "wrong-guess") }
        try store.device.unlock(passcode: "secret-passcode")
        try store.device.lock()
        let messages = recorder.all.map(\.1)
        #expect(messages.contains("passcode attempt failed"))
        #expect(messages.contains("device unlocked"))
        #expect(messages.contains("device locked"))
        #expect(messages.contains("class keys discarded"))
        for (_, message, metadata) in recorder.all {
            #expect(!message.contains("secret-passcode") && !metadata.contains("secret-passcode") && !metadata.contains("wrong-guess"))
        }
    }
}
