import Foundation
import Testing
@testable import DataProtection

/// Booting from the device files, and the errors for bad configurations and
/// damaged device files (semantics.md, "Errors": tampered data is never used).
@Suite("Device boot")
struct DeviceBootTests {
    @Test("a new device directory gets its four device files and its ownership lock, and nothing else")
    func deviceFiles() throws {
        try withDevice(passcode: "1234") { fixture in
            let names = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path).sorted()
            #expect(names == ["attempts", "effaceable", "keybag", "lock", "uid"])
        }
    }

    @Test("device files are readable by the owner only")
    func permissions() throws {
        try withDevice(passcode: "1234") { fixture in
            for name in ["attempts", "effaceable", "keybag", "lock", "uid"] {
                let attributes = try FileManager.default.attributesOfItem(atPath: fixture.file(name).path)
                #expect((attributes[.posixPermissions] as? Int) == 0o600, "\(name)")
            }
        }
    }

    @Test("reopening a device keeps its identity: same keys, same passcode")
    func reopenKeepsIdentity() throws {
        try withDevice(passcode: "1234") { fixture in
            let before = fixture.fingerprints()
            try fixture.reopen()
            try fixture.device.unlock(passcode: "1234")
            #expect(fixture.fingerprints() == before)
        }
    }

    @Test("leftover temporary files are removed at boot")
    func debrisRemoved() throws {
        try withDevice(passcode: "1234") { fixture in
            let debris = fixture.directory.appendingPathComponent(AtomicFileWriter.temporaryPrefix + "keybag-0011223344556677")
            try Data("half-written".utf8).write(to: debris)
            try fixture.reopen()
            #expect(!FileManager.default.fileExists(atPath: debris.path))
            try fixture.device.unlock(passcode: "1234")
        }
    }

    static let invalidConfigurations: [DeviceConfiguration] = [
        DeviceConfiguration(gracePeriod: .seconds(-1), passcodeCost: .minimal),
        DeviceConfiguration(inactivityPeriod: .seconds(-1), passcodeCost: .minimal),
        DeviceConfiguration(eraseAfterFailedAttempts: 0, passcodeCost: .minimal),
        DeviceConfiguration(eraseAfterFailedAttempts: -3, passcodeCost: .minimal),
        DeviceConfiguration(passcodeCost: .fixed(operations: 0, memoryBytes: 8 * 1024)),
        DeviceConfiguration(passcodeCost: .fixed(operations: 1, memoryBytes: 8 * 1024 - 1)),
        DeviceConfiguration(passcodeCost: .fixed(operations: 1, memoryBytes: (4 << 30) + 1)),
    ]

    @Test("an invalid configuration is invalidArgument, and creates no device", arguments: invalidConfigurations)
    func invalidConfiguration(_ configuration: DeviceConfiguration) throws {
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            expectError(.invalidArgument) {
                _ = try Device(directory: directory, clock: VirtualClock(), configuration: configuration)
            }
            #expect(!FileManager.default.fileExists(atPath: directory.path))
        }
    }

    @Test("the defaults: grace 0 s, inactivity 48 h, no erase, standard cost")
    func defaults() {
        let configuration = DeviceConfiguration()
        #expect(configuration.gracePeriod == .zero)
        #expect(configuration.inactivityPeriod == .seconds(48 * 3600))
        #expect(configuration.eraseAfterFailedAttempts == nil)
        #expect(configuration.passcodeCost == .standard)
    }

    enum Damage: String, CaseIterable, Sendable {
        case keybagByteFlipped, keybagTruncated, keybagMissing
        case effaceableCorrupt, effaceableFromAnotherDevice
        case uidMissing, uidFromAnotherDevice, uidCorrupt
    }

    @Test("damaged device files fail to boot with integrityFailure", arguments: Damage.allCases)
    func damagedFiles(_ damage: Damage) throws {
        try withScratchDirectory { root in
            let other = try DeviceFixture(root: root.appendingPathComponent("other"), configuration: .testing(), passcode: "1234")
            let fixture = try DeviceFixture(root: root, configuration: .testing(), passcode: "1234")
            func replace(_ name: String) throws {
                try FileManager.default.removeItem(at: fixture.file(name))
                try FileManager.default.copyItem(at: other.file(name), to: fixture.file(name))
            }
            func flip(_ name: String, at index: Int) throws {
                var bytes = try Data(contentsOf: fixture.file(name))
                bytes[index] ^= 0x80
                try bytes.write(to: fixture.file(name))
            }
            switch damage {
            case .keybagByteFlipped: try flip("keybag", at: 100)
            case .keybagTruncated: try Data(contentsOf: fixture.file("keybag")).dropLast(1).write(to: fixture.file("keybag"))
            case .keybagMissing: try FileManager.default.removeItem(at: fixture.file("keybag"))
            case .effaceableCorrupt: try flip("effaceable", at: 0)
            case .effaceableFromAnotherDevice: try replace("effaceable")
            case .uidMissing: try FileManager.default.removeItem(at: fixture.file("uid"))
            case .uidFromAnotherDevice: try replace("uid")
            case .uidCorrupt: try flip("uid", at: 2)
            }
            expectError(.integrityFailure) { try fixture.reopen() }
        }
    }
}
