import Foundation
import Testing
@testable import DataProtection

/// semantics.md, "Keys" (passcode change rewraps class keys only) and
/// "Passcode attempts" (passcode changes check the old passcode as an attempt
/// and need the device unlocked).
@Suite("Passcode changes")
struct PasscodeChangeTests {
    enum Change: String, CaseIterable, Sendable {
        case set, change, remove

        /// Performs the change on a device whose passcode is "1234" (none for `set`).
        func perform(on device: Device, old: String = "1234") throws {
            switch self {
            case .set: try device.setPasscode("5678")
            case .change: try device.changePasscode(from: old, to: "5678")
            case .remove: try device.removePasscode(old)
            }
        }

        var initialPasscode: String? { self == .set ? nil : "1234" }
    }

    // MARK: - Effect

    @Test("setPasscode: the new passcode unlocks, the empty one no longer does")
    func setPasscode() throws {
        try withDevice { fixture in
            try fixture.device.unlock()
            try fixture.device.setPasscode("1234")
            #expect(fixture.device.hasPasscode)
            try fixture.device.lock()
            expectError(.incorrectPasscode) { try fixture.device.unlock() }
            try fixture.device.unlock(passcode: "1234")
        }
    }

    @Test("changePasscode: the new passcode unlocks, the old one no longer does")
    func changePasscode() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.changePasscode(from: "1234", to: "5678")
            try fixture.device.lock()
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "1234") }
            try fixture.device.unlock(passcode: "5678")
        }
    }

    @Test("removePasscode: a bare unlock works, the old passcode no longer does")
    func removePasscode() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.removePasscode("1234")
            #expect(!fixture.device.hasPasscode)
            #expect(fixture.device.passcodeDerivation == nil)
            try fixture.device.lock()
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "1234") }
            try fixture.device.unlock()
        }
    }

    @Test("a passcode change is durable: it holds after a process restart", arguments: Change.allCases)
    func changeIsDurable(_ change: Change) throws {
        try withDevice(passcode: change.initialPasscode) { fixture in
            if change == .set { try fixture.device.unlock() }
            try change.perform(on: fixture.device)
            try fixture.reopen()
            try fixture.device.unlock(passcode: change == .remove ? nil : "5678")
        }
    }

    @Test("setPasscode uses the configured cost")
    func configuredCost() throws {
        try withDevice(passcode: "1234") { fixture in
            let derivation = try #require(fixture.device.passcodeDerivation)
            #expect(derivation.operations == 1)
            #expect(derivation.memoryBytes == 8 * 1024)
        }
    }

    // MARK: - Keys stay

    @Test("every class key is the same before and after set, change and remove, and after reboot and unlock")
    func keysStable() throws {
        try withDevice { fixture in
            try fixture.device.unlock()
            let original = fixture.fingerprints()
            #expect(original.count == KeybagSlot.allCases.count)

            try fixture.device.setPasscode("1234")
            #expect(fixture.fingerprints() == original, "after set")
            try fixture.device.reboot()
            try fixture.device.unlock(passcode: "1234")
            #expect(fixture.fingerprints() == original, "after set and reboot")

            try fixture.device.changePasscode(from: "1234", to: "5678")
            #expect(fixture.fingerprints() == original, "after change")
            try fixture.device.reboot()
            try fixture.device.unlock(passcode: "5678")
            #expect(fixture.fingerprints() == original, "after change and reboot")

            try fixture.device.removePasscode("5678")
            #expect(fixture.fingerprints() == original, "after remove")
            try fixture.reopen()
            try fixture.device.unlock()
            #expect(fixture.fingerprints() == original, "after remove and process restart")
        }
    }

    @Test("a passcode change keeps the keybag's class B public key")
    func classBPublicKeyStable() throws {
        try withDevice(passcode: "1234") { fixture in
            let publicKey = fixture.device.classBPublicKey
            try fixture.device.changePasscode(from: "1234", to: "5678")
            try fixture.reopen()
            #expect(fixture.device.classBPublicKey == publicKey)
        }
    }

    // MARK: - Preconditions and errors

    @Test("every passcode change needs the device unlocked", arguments: Change.allCases, [DeviceState.booted, .locked])
    func needsUnlocked(_ change: Change, state: DeviceState) throws {
        try withDevice(.testing(grace: .seconds(10)), passcode: change.initialPasscode) { fixture in
            if change == .set { try fixture.device.unlock() }
            if state == .booted { try fixture.device.reboot() } else { try fixture.device.lock() }
            // Locked inside the grace period is still locked.
            expectError(.protectedDataUnavailable) { try change.perform(on: fixture.device) }
            #expect(fixture.device.failedPasscodeAttempts == 0, "a refused change counted an attempt")
            #expect(fixture.device.hasPasscode == (change != .set), "a refused change changed the passcode")
        }
    }

    @Test("setPasscode when a passcode is set is invalidArgument")
    func setTwice() throws {
        try withDevice(passcode: "1234") { fixture in
            expectError(.invalidArgument) { try fixture.device.setPasscode("5678") }
            try fixture.device.lock()
            try fixture.device.unlock(passcode: "1234")
        }
    }

    @Test("an empty new passcode is invalidArgument and counts no attempt", arguments: [Change.set, .change])
    func emptyNewPasscode(_ change: Change) throws {
        try withDevice(passcode: change.initialPasscode) { fixture in
            if change == .set { try fixture.device.unlock() }
            expectError(.invalidArgument) {
                if change == .set {
                    try fixture.device.setPasscode("")
                } else {
                    try fixture.device.changePasscode(from: "wrong", to: "")
                }
            }
            #expect(fixture.device.failedPasscodeAttempts == 0)
            #expect(fixture.device.hasPasscode == (change == .change))
        }
    }

    @Test("a new passcode with a NUL character is invalidArgument")
    func nulInPasscode() throws {
        try withDevice(passcode: "1234") { fixture in
            expectError(.invalidArgument) { try fixture.device.changePasscode(from: "1234", to: "12\u{0}34") }
        }
    }

    @Test("a wrong old passcode is incorrectPasscode, counted, and changes nothing", arguments: [Change.change, .remove])
    func wrongOldPasscode(_ change: Change) throws {
        try withDevice(passcode: "1234") { fixture in
            let before = fixture.fingerprints()
            expectError(.incorrectPasscode) { try change.perform(on: fixture.device, old: "0000") }
            #expect(fixture.device.failedPasscodeAttempts == 1)
            #expect(fixture.device.state == .unlocked)
            #expect(fixture.fingerprints() == before)
            try fixture.reopen()
            try fixture.device.unlock(passcode: "1234")
        }
    }

    @Test("the old passcode is subject to the delay, and a refused one is not counted", arguments: [Change.change, .remove])
    func oldPasscodeDelayed(_ change: Change) throws {
        try withDevice(passcode: "1234") { fixture in
            fixture.fail(5)
            let allowed = try #require(fixture.device.nextPasscodeAttemptAllowed)
            let error = expectError(.passcodeAttemptsDelayed) { try change.perform(on: fixture.device) }
            #expect(error?.retryAfter == .seconds(60))
            #expect(fixture.device.failedPasscodeAttempts == 5)
            #expect(fixture.device.hasPasscode)
            fixture.clock.advance(to: allowed)
            try change.perform(on: fixture.device)
            #expect(fixture.device.failedPasscodeAttempts == 0, "a right old passcode resets the count")
        }
    }

    @Test("a repeated wrong old passcode is not counted again")
    func oldPasscodeRepeat() throws {
        try withDevice(passcode: "1234") { fixture in
            expectError(.incorrectPasscode) { try fixture.device.changePasscode(from: "0000", to: "5678") }
            expectError(.incorrectPasscode) { try fixture.device.removePasscode("0000") }
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "0000") }
            #expect(fixture.device.failedPasscodeAttempts == 1)
        }
    }

    @Test("removePasscode on a device without a passcode takes the empty passcode only")
    func removeWithoutPasscode() throws {
        try withDevice { fixture in
            try fixture.device.unlock()
            expectError(.incorrectPasscode) { try fixture.device.removePasscode("1234") }
            try fixture.device.removePasscode("")
            #expect(!fixture.device.hasPasscode)
        }
    }
}
