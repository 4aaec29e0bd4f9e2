import Foundation
import SodiumBridge
import Testing
@testable import DataProtection

/// The device key behind a public protocol (issue 12): a TPM, HSM or kernel keyring can hold
/// it instead of the `uid` file, through the public API only.
@Suite("Device key providers")
struct DeviceKeyProviderTests {
    /// A stand-in for hardware: a key that never leaves it, a count of what it was asked, and
    /// a switch that makes it unreachable.
    final class HardwareKey: DeviceKeyProvider {
        private let key: SecureBytes
        let requests = Locked(0)
        let unreachable = Locked(false)

        init(key: SecureBytes = .random(count: 32)) {
            self.key = key
        }

        func deriveKey(from message: KeyMaterial) throws(DataProtectionError) -> KeyMaterial {
            requests.withLock { $0 += 1 }
            if unreachable.withLock({ $0 }) {
                throw DataProtectionError(.ioFailure, "The hardware key is unreachable.")
            }
            // Keyed BLAKE2b-256, as the built-in provider computes: any PRF would do.
            let derived = KeyMaterial(count: 32)
            let output = BLAKE2b.deriveKey(key: key, [.secret(message.bytes)])
            derived.withUnsafeMutableBytes { out in output.withUnsafeBytes { out.copyMemory(from: $0) } }
            return derived
        }
    }

    /// A provider that answers with the wrong length.
    struct ShortKey: DeviceKeyProvider {
        func deriveKey(from message: KeyMaterial) throws(DataProtectionError) -> KeyMaterial {
            KeyMaterial(count: 16)
        }
    }

    static func configuration(_ provider: (any DeviceKeyProvider)?) -> DeviceConfiguration {
        var configuration = DeviceConfiguration.testing()
        configuration.deviceKeyProvider = provider
        return configuration
    }

    /// A new device in `root/device` with passcode 1234, its key held by `provider`, unlocked.
    static func createUnlocked(in root: URL, provider: (any DeviceKeyProvider)?) throws -> Device {
        let device = try Device(creatingAt: root.appendingPathComponent("device"), passcode: "1234", clock: VirtualClock(),
                                configuration: configuration(provider))
        try device.unlock(passcode: "1234")
        return device
    }

    @Test("a device created with a provider writes no key file and opens again only with the same key")
    func providerOwnsTheKey() throws {
        try withScratchDirectory { root in
            let deviceDirectory = root.appendingPathComponent("device")
            let hardware = HardwareKey()
            do {
                let device = try Self.createUnlocked(in: root, provider: hardware)
                let store = try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
                try store.write(Data("complete".utf8), to: "a.txt", protection: .complete)
                try store.write(Data("none".utf8), to: "b.txt", protection: .none)
            }
            #expect(hardware.requests.withLock { $0 } > 0)
            #expect(!FileManager.default.fileExists(atPath: deviceDirectory.appendingPathComponent("uid").path),
                    "a key file was written although a provider holds the key")

            // The same key: everything opens.
            do {
                let device = try Device(directory: deviceDirectory, clock: VirtualClock(), configuration: Self.configuration(hardware))
                let store = try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
                #expect(try store.contents(atPath: "b.txt") == Data("none".utf8))
                try device.unlock(passcode: "1234")
                #expect(try store.contents(atPath: "a.txt") == Data("complete".utf8))
            }
            // Another key, or the default key file, opens nothing: integrityFailure, and no key file appears.
            for other in [HardwareKey(), nil] as [HardwareKey?] {
                expectError(.integrityFailure) {
                    _ = try Device(directory: deviceDirectory, clock: VirtualClock(), configuration: Self.configuration(other))
                }
            }
            #expect(!FileManager.default.fileExists(atPath: deviceDirectory.appendingPathComponent("uid").path))
        }
    }

    @Test("the built-in key file is one provider among others: its key in a custom provider opens the same device")
    func fileKeyThroughAProvider() throws {
        try withScratchDirectory { root in
            let deviceDirectory = root.appendingPathComponent("device")
            do {
                let device = try Self.createUnlocked(in: root, provider: nil)
                let store = try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
                try store.write(Data("complete".utf8), to: "a.txt", protection: .complete)
            }
            // "DPUK" || 0x01 || 32 key bytes (Keys/key-hierarchy.md §3).
            let file = try Data(contentsOf: deviceDirectory.appendingPathComponent("uid"))
            try #require(file.count == 37)
            let key = SecureBytes(count: 32) { $0.copyBytes(from: file.suffix(32)) }
            let device = try Device(directory: deviceDirectory, clock: VirtualClock(), configuration: Self.configuration(HardwareKey(key: key)))
            let store = try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
            try device.unlock(passcode: "1234")
            #expect(try store.contents(atPath: "a.txt") == Data("complete".utf8))
        }
    }

    @Test("a provider that fails: the operation fails with its error and changes nothing; a wrong-length key is refused")
    func failingProvider() throws {
        try withScratchDirectory { root in
            let deviceDirectory = root.appendingPathComponent("device")
            let hardware = HardwareKey()
            do {
                let device = try Self.createUnlocked(in: root, provider: hardware)
                hardware.unreachable.withLock { $0 = true }
                expectError(.ioFailure) { try device.changePasscode(from: "1234", to: "5678") }
                hardware.unreachable.withLock { $0 = false }
            }
            // The change did not happen: the old passcode opens the device, the new one does not.
            let device = try Device(directory: deviceDirectory, clock: VirtualClock(), configuration: Self.configuration(hardware))
            expectError(.incorrectPasscode) { try device.unlock(passcode: "5678") }
            try device.unlock(passcode: "1234")
            #expect(device.state == .unlocked)

            expectError(.ioFailure) {
                _ = try Device(creatingAt: root.appendingPathComponent("short"), passcode: "1234", clock: VirtualClock(),
                               configuration: Self.configuration(ShortKey()))
            }
        }
    }

    @Test("a key material's description shows its length, never its bytes")
    func keyMaterialDescription() {
        let material = KeyMaterial(count: 32)
        material.withUnsafeMutableBytes { $0.storeBytes(of: 0xAB, toByteOffset: 0, as: UInt8.self) }
        #expect(material.description == "KeyMaterial(32 bytes)")
        #expect(!String(reflecting: material).lowercased().contains("ab"))
        #expect(material.count == 32)
    }
}
