import Foundation
import Testing
@testable import DataProtection

/// semantics.md, "Passcode attempts": failed attempts are counted across
/// process restarts, and a deleted or edited counter never resets the delay.
@Suite("Attempt counter file")
struct AttemptCounterFileTests {
    enum Tampering: Sendable, CustomTestStringConvertible {
        case delete
        case flipByte(Int)
        case truncate
        case extend
        case replaceWithFresh   // a valid counter of 0 from another device

        var testDescription: String {
            switch self {
            case .delete: "delete"
            case .flipByte(let index): "flip byte \(index)"
            case .truncate: "truncate"
            case .extend: "extend"
            case .replaceWithFresh: "replace with another device's fresh counter"
            }
        }

        func apply(to url: URL, freshCounterFrom other: URL?) throws {
            switch self {
            case .delete:
                try FileManager.default.removeItem(at: url)
            case .flipByte(let index):
                var bytes = try Data(contentsOf: url)
                bytes[index] ^= 0x01
                try bytes.write(to: url)
            case .truncate:
                try Data(contentsOf: url).dropLast().write(to: url)
            case .extend:
                try (Data(contentsOf: url) + [0]).write(to: url)
            case .replaceWithFresh:
                try FileManager.default.removeItem(at: url)
                try FileManager.default.copyItem(at: other!, to: url)
            }
        }
    }

    /// Bytes of every field: magic, version, failures, flags, last failure, fingerprint, MAC.
    static let tamperings: [Tampering] = [.delete, .truncate, .extend, .replaceWithFresh]
        + [0, 4, 5, 9, 10, 17, 18, 49, 50, 81].map { .flipByte($0) }

    @Test("the counter file has the documented size")
    func fileSize() throws {
        try withDevice(passcode: "1234") { fixture in
            let data = try Data(contentsOf: fixture.file("attempts"))
            #expect(data.count == AttemptRecord.fileByteCount)
            #expect(data.count == 82)
        }
    }

    @Test("the count and the delay survive a process restart")
    func survivesProcessRestart() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.fail(6)
            let allowed = fixture.device.nextPasscodeAttemptAllowed
            try fixture.reopen()
            #expect(fixture.device.failedPasscodeAttempts == 6)
            #expect(fixture.device.nextPasscodeAttemptAllowed == allowed)
            expectError(.passcodeAttemptsDelayed) { try fixture.device.unlock(passcode: "1234") }
        }
    }

    @Test("a tampered counter gives 9 failures and the longest delay from boot",
          arguments: tamperings, [RestartTests.Restart.processRestart, .reboot])
    func tamperedCounter(_ tampering: Tampering, restart: RestartTests.Restart) throws {
        try withScratchDirectory { root in
            // Another device's fresh, valid counter file: a replay from elsewhere.
            let other = try DeviceFixture(root: root.appendingPathComponent("other"), configuration: .testing(), passcode: nil)
            let fixture = try DeviceFixture(root: root, configuration: .testing(), passcode: "1234")
            try fixture.device.lock()
            fixture.fail(2)
            fixture.clock.advance(by: .seconds(1000))
            try tampering.apply(to: fixture.file("attempts"), freshCounterFrom: other.file("attempts"))
            try restart.perform(on: fixture)
            let bootedAt = fixture.clock.now

            #expect(fixture.device.failedPasscodeAttempts == 9)
            #expect(fixture.device.nextPasscodeAttemptAllowed == bootedAt + .seconds(3600))
            let error = expectError(.passcodeAttemptsDelayed) { try fixture.device.unlock(passcode: "1234") }
            #expect(error?.retryAfter == .seconds(3600))
            #expect(fixture.device.failedPasscodeAttempts == 9)

            // The punitive record is itself durable: another restart does not shorten it.
            try fixture.reopen()
            #expect(fixture.device.failedPasscodeAttempts == 9)
            #expect(fixture.device.nextPasscodeAttemptAllowed == bootedAt + .seconds(3600))

            // After the hour, the right passcode still unlocks and resets.
            fixture.clock.advance(by: .seconds(3600))
            try fixture.device.unlock(passcode: "1234")
            #expect(fixture.device.failedPasscodeAttempts == 0)
        }
    }
}
