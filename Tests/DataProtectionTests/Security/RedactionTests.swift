import Foundation
import SodiumBridge
import Testing
@testable import DataProtection

/// Nothing secret reaches an error's message, hint or description, nor the
/// description of a key-holding type: every class key and per-file key created
/// while errors of every kind are provoked is looked for in every string, as raw
/// bytes, hex, base64 and base64url.
@Suite("Secrets stay out of messages and descriptions")
struct RedactionTests {
    @Test("errors and descriptions produced around live keys show none of them")
    func noSecretInStrings() async throws {
        try await withScratchDirectory { root in
            let clock = VirtualClock()
            let (secrets, texts) = try await SecretRecorder.recording { () async throws -> ([SecretRecorder.Secret], [String]) in
                var texts: [String] = []
                func collect(_ body: () throws -> Void) {
                    do { try body() } catch let error as DataProtectionError {
                        texts += [error.message, error.hint ?? "", String(describing: error), String(reflecting: error),
                                  error.localizedDescription]
                    } catch {
                        texts.append(String(describing: error))
                    }
                }
                let store = try ProtectedStore(directory: root, clock: clock, configuration: .testing(grace: .zero))
                try await store.device.unlock()
                try await store.device.setPasscode("1234")
                for protection in ProtectionClass.allCases {
                    try await store.write(Data("x".utf8), to: "Documents/\(protection.rawValue)", protection: ProtectionChoice(protection))
                }
                let handle = try store.openFile(atPath: "Documents/open", create: true, protection: .complete)
                try handle.write(contentsOf: Data("y".utf8))
                collect { try store.device.unlock(passcode: "0000") }
                try store.device.lock()
                collect { try handle.write(contentsOf: Data("z".utf8)) }
                collect { _ = try store.contents(atPath: "Documents/complete") }
                collect { try store.write(Data(), to: "Documents/new", protection: .complete) }
                collect { try store.device.unlock(passcode: "0001") }
                try await store.device.unlock(passcode: "1234")
                // Tamper with a file: flip a byte of its first chunk record.
                let files = root.appendingPathComponent("files")
                for name in try FileManager.default.contentsOfDirectory(atPath: files.path) where name != "dpdir" && !name.hasPrefix(".") {
                    let url = files.appendingPathComponent(name)
                    guard var bytes = try? Data(contentsOf: url), bytes.count > 1100 else { continue }
                    bytes[1050] ^= 1
                    try bytes.write(to: url)
                }
                for protection in ProtectionClass.allCases {
                    collect { _ = try store.contents(atPath: "Documents/\(protection.rawValue)") }
                }
                collect { _ = try store.contents(atPath: "Documents/missing") }
                collect { try store.device.setPasscode("") }
                texts.append(String(describing: store.device))
                texts.append(String(describing: store))
                let recorded = SecretRecorder.recorded
                return (recorded, texts)
            }
            #expect(secrets.contains { $0.label == "class key complete" })
            #expect(secrets.contains { $0.label == "file key" })
            #expect(texts.count > 20)
            let key = SecureBytes.random(count: 32)
            let keySecret = key.withUnsafeBytes { SecretRecorder.Secret(label: "a SecureBytes", bytes: $0) }
            let described = [String(describing: key), String(reflecting: key), "\(key)"]
            for text in described {
                #expect(!keySecret.occurs(in: text), "\(text)")
            }
            for secret in secrets {
                for text in texts {
                    #expect(!secret.occurs(in: text), "\(secret.label) appears in: \(text)")
                }
            }
            // The check itself: a string that does show a key is caught.
            #expect(secrets.first.map { _ in true } == true)
            let shown = key.withUnsafeBytes { Data($0).map { String(format: "%02x", $0) }.joined() }
            #expect(keySecret.occurs(in: "key=\(shown)"))
        }
    }
}
