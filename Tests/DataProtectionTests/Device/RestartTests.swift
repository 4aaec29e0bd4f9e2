import Foundation
import Testing
@testable import DataProtection

/// semantics.md, "Device states": `reboot` and `crash`.
@Suite("Reboot and crash")
struct RestartTests {
    enum Restart: String, CaseIterable, Sendable {
        case reboot, crash, processRestart

        func perform(on fixture: DeviceFixture) throws {
            switch self {
            case .reboot: try fixture.device.reboot()
            case .crash: try fixture.device.crash()
            case .processRestart: try fixture.reopen()
            }
        }
    }

    @Test("a restart from any state boots: state booted, only class none available",
          arguments: Restart.allCases, [DeviceState.booted, .unlocked, .locked])
    func restartBoots(_ restart: Restart, from state: DeviceState) throws {
        try withDevice(.testing(grace: .seconds(10)), passcode: "1234") { fixture in
            switch state {
            case .booted: try fixture.device.reboot()
            case .unlocked: break
            case .locked: try fixture.device.lock()   // inside the grace period: every key still present
            }
            try restart.perform(on: fixture)
            #expect(fixture.device.state == .booted)
            for protectionClass in ProtectionClass.allCases {
                #expect(fixture.device.isAvailable(protectionClass) == (protectionClass == .none), "\(protectionClass)")
            }
            for slot in KeybagSlot.allCases where slot.isPasscodeWrapped {
                #expect(fixture.device.keyFingerprint(slot) == nil, "\(slot) still in memory")
            }
        }
    }

    @Test("class C is gone after a restart, however long it was available", arguments: Restart.allCases)
    func classCGone(_ restart: Restart) throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            #expect(fixture.device.isAvailable(.completeUntilFirstUserAuthentication))
            try restart.perform(on: fixture)
            #expect(!fixture.device.isAvailable(.completeUntilFirstUserAuthentication))
        }
    }

    @Test("the same class keys come back on the next unlock", arguments: Restart.allCases)
    func keysReload(_ restart: Restart) throws {
        try withDevice(passcode: "1234") { fixture in
            let before = fixture.fingerprints()
            try restart.perform(on: fixture)
            try fixture.device.unlock(passcode: "1234")
            #expect(fixture.device.state == .unlocked)
            #expect(fixture.fingerprints() == before)
            #expect(fixture.device.hasPasscode)
        }
    }

    @Test("class none and the metadata key are available right after a restart", arguments: Restart.allCases)
    func deviceOnlyKeysAtBoot(_ restart: Restart) throws {
        try withDevice(passcode: "1234") { fixture in
            let before = fixture.fingerprints()
            try restart.perform(on: fixture)
            #expect(fixture.device.keyFingerprint(.none) == before[.none])
            #expect(fixture.device.keyFingerprint(.metadata) == before[.metadata])
            #expect(throws: Never.self) { try fixture.device.withMetadataKey { _ in } }
        }
    }

    @Test("a restart inside the grace period cancels the pending discard: the next unlock keeps its keys",
          arguments: [Restart.reboot, .crash])
    func restartCancelsDeadlines(_ restart: Restart) throws {
        try withDevice(.testing(grace: .seconds(10), inactivity: .seconds(20)), passcode: "1234") { fixture in
            try fixture.device.lock()
            try restart.perform(on: fixture)
            try fixture.device.unlock(passcode: "1234")
            fixture.clock.advance(by: .seconds(30))
            #expect(fixture.device.isProtectedDataAvailable)
            #expect(fixture.device.isAvailable(.completeWhenUserInactive))
        }
    }

    @Test("the clock keeps running across a reboot: a passcode delay is not shortened", arguments: Restart.allCases)
    func delaySurvivesRestart(_ restart: Restart) throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.fail(5)
            let allowed = try #require(fixture.device.nextPasscodeAttemptAllowed)
            fixture.clock.advance(by: .seconds(30))
            try restart.perform(on: fixture)
            #expect(fixture.device.failedPasscodeAttempts == 5)
            #expect(fixture.device.nextPasscodeAttemptAllowed == allowed)
            let error = expectError(.passcodeAttemptsDelayed) { try fixture.device.unlock(passcode: "1234") }
            #expect(error?.retryAfter == .seconds(30))
        }
    }
}
