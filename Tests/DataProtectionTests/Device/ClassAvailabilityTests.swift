import Foundation
import Testing
@testable import DataProtection

/// semantics.md, "Protection classes": which class keys are present in each
/// state, the grace period and the inactivity period.
@Suite("Class availability")
struct ClassAvailabilityTests {
    static let hour = Duration.seconds(3600)

    @Test("before first unlock only class none is available", arguments: ProtectionClass.allCases)
    func booted(_ protectionClass: ProtectionClass) throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.reboot()
            #expect(fixture.device.isAvailable(protectionClass) == (protectionClass == .none))
        }
    }

    @Test("a fresh device before its first unlock has only class none", arguments: ProtectionClass.allCases)
    func freshBooted(_ protectionClass: ProtectionClass) throws {
        try withDevice { fixture in
            #expect(fixture.device.isAvailable(protectionClass) == (protectionClass == .none))
        }
    }

    @Test("unlocked: every class is available", arguments: ProtectionClass.allCases)
    func unlocked(_ protectionClass: ProtectionClass) throws {
        try withDevice(passcode: "1234") { fixture in
            #expect(fixture.device.isAvailable(protectionClass))
        }
    }

    @Test("locked after the grace period: complete and completeUnlessOpen are unavailable, the others available",
          arguments: ProtectionClass.allCases)
    func lockedAfterGrace(_ protectionClass: ProtectionClass) throws {
        try withDevice(.testing(grace: .seconds(10)), passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.clock.advance(by: .seconds(10))
            let locks = protectionClass == .complete || protectionClass == .completeUnlessOpen
            #expect(fixture.device.isAvailable(protectionClass) == !locks)
        }
    }

    @Test("locked with the default grace of 0 s: complete and completeUnlessOpen go at once",
          arguments: ProtectionClass.allCases)
    func lockedWithoutGrace(_ protectionClass: ProtectionClass) throws {
        try withDevice(DeviceConfiguration(passcodeCost: .minimal), passcode: "1234") { fixture in
            #expect(fixture.device.configuration.gracePeriod == .zero)
            try fixture.device.lock()
            let locks = protectionClass == .complete || protectionClass == .completeUnlessOpen
            #expect(fixture.device.isAvailable(protectionClass) == !locks)
        }
    }

    @Test("inside the grace period every class is available", arguments: ProtectionClass.allCases)
    func insideGrace(_ protectionClass: ProtectionClass) throws {
        try withDevice(.testing(grace: .seconds(10)), passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.clock.advance(by: .seconds(10) - .milliseconds(1))
            #expect(fixture.device.isAvailable(protectionClass))
        }
    }

    @Test("grace period: available at grace - 1 ms, unavailable at grace")
    func graceBoundary() throws {
        try withDevice(.testing(grace: .seconds(10)), passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.clock.advance(by: .seconds(10) - .milliseconds(1))
            #expect(fixture.device.isProtectedDataAvailable)
            #expect(fixture.device.keyFingerprint(.complete) != nil)
            fixture.clock.advance(by: .milliseconds(1))
            #expect(!fixture.device.isProtectedDataAvailable)
            #expect(fixture.device.keyFingerprint(.complete) == nil, "the key was not discarded from memory")
            #expect(fixture.device.keyFingerprint(.completeUnlessOpenSecret) == nil)
        }
    }

    @Test("the grace deadline holds without anyone advancing through it: reading the clock is enough")
    func graceWithoutWakeUp() throws {
        try withDevice(.testing(grace: .seconds(10)), passcode: "1234") { fixture in
            try fixture.device.lock()
            // Jump straight past the deadline: the wake-up fires on the way, and
            // isAvailable must agree either way.
            fixture.clock.advance(by: .seconds(11))
            #expect(!fixture.device.isAvailable(.complete))
            #expect(!fixture.device.isAvailable(.completeUnlessOpen))
        }
    }

    @Test("unlocking inside the grace period keeps the keys, past the old deadline too")
    func unlockInsideGrace() throws {
        try withDevice(.testing(grace: .seconds(10)), passcode: "1234") { fixture in
            let before = fixture.fingerprints()
            try fixture.device.lock()
            fixture.clock.advance(by: .seconds(5))
            try fixture.device.unlock(passcode: "1234")
            fixture.clock.advance(by: .seconds(60))
            #expect(fixture.device.isProtectedDataAvailable)
            #expect(fixture.device.isAvailable(.completeUnlessOpen))
            #expect(fixture.fingerprints() == before)
        }
    }

    @Test("CX is discarded exactly at lock + inactivity")
    func inactivityBoundary() throws {
        try withDevice(.testing(inactivity: Self.hour), passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.clock.advance(by: Self.hour - .milliseconds(1))
            #expect(fixture.device.isAvailable(.completeWhenUserInactive))
            #expect(fixture.device.keyFingerprint(.completeWhenUserInactive) != nil)
            fixture.clock.advance(by: .milliseconds(1))
            #expect(!fixture.device.isAvailable(.completeWhenUserInactive))
            #expect(fixture.device.keyFingerprint(.completeWhenUserInactive) == nil)
            // Class C and none stay.
            #expect(fixture.device.isAvailable(.completeUntilFirstUserAuthentication))
            #expect(fixture.device.isAvailable(.none))
        }
    }

    @Test("the default inactivity period is 48 h")
    func defaultInactivity() throws {
        try withDevice(DeviceConfiguration(passcodeCost: .minimal), passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.clock.advance(by: .seconds(48 * 3600) - .milliseconds(1))
            #expect(fixture.device.isAvailable(.completeWhenUserInactive))
            fixture.clock.advance(by: .milliseconds(1))
            #expect(!fixture.device.isAvailable(.completeWhenUserInactive))
        }
    }

    @Test("unlocking before the inactivity period ends keeps CX, past the old deadline too")
    func unlockBeforeInactivity() throws {
        try withDevice(.testing(inactivity: Self.hour), passcode: "1234") { fixture in
            let before = fixture.device.keyFingerprint(.completeWhenUserInactive)
            try fixture.device.lock()
            fixture.clock.advance(by: Self.hour - .milliseconds(1))
            try fixture.device.unlock(passcode: "1234")
            fixture.clock.advance(by: Self.hour * 2)
            #expect(fixture.device.isAvailable(.completeWhenUserInactive))
            #expect(fixture.device.keyFingerprint(.completeWhenUserInactive) == before)
        }
    }

    @Test("after the inactivity expiry, unlocking brings the same CX key back")
    func unlockAfterInactivity() throws {
        try withDevice(.testing(inactivity: Self.hour), passcode: "1234") { fixture in
            let before = fixture.fingerprints()
            try fixture.device.lock()
            fixture.clock.advance(by: Self.hour)
            #expect(!fixture.device.isAvailable(.completeWhenUserInactive))
            try fixture.device.unlock(passcode: "1234")
            #expect(fixture.device.isAvailable(.completeWhenUserInactive))
            #expect(fixture.fingerprints() == before)
        }
    }

    @Test("a second lock cycle gets a fresh inactivity period")
    func relockRestartsInactivity() throws {
        try withDevice(.testing(inactivity: Self.hour), passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.clock.advance(by: .seconds(1800))
            try fixture.device.unlock(passcode: "1234")
            try fixture.device.lock()
            fixture.clock.advance(by: Self.hour - .milliseconds(1))
            #expect(fixture.device.isAvailable(.completeWhenUserInactive))
            fixture.clock.advance(by: .milliseconds(1))
            #expect(!fixture.device.isAvailable(.completeWhenUserInactive))
        }
    }

    @Test("class C survives any time locked, until reboot")
    func classCUntilReboot() throws {
        try withDevice(.testing(inactivity: Self.hour), passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.clock.advance(by: .seconds(365 * 24 * 3600))
            #expect(fixture.device.isAvailable(.completeUntilFirstUserAuthentication))
            try fixture.device.reboot()
            #expect(!fixture.device.isAvailable(.completeUntilFirstUserAuthentication))
        }
    }

    @Test("isProtectedDataAvailable is true exactly while the complete key is in memory")
    func protectedDataTracksComplete() throws {
        try withDevice(.testing(grace: .seconds(10)), passcode: "1234") { fixture in
            let device = fixture.device
            func check(_ where: Comment) {
                #expect(device.isProtectedDataAvailable == device.isAvailable(.complete), `where`)
                #expect(device.isProtectedDataAvailable == (device.keyFingerprint(.complete) != nil), `where`)
            }
            check("unlocked")
            #expect(device.isProtectedDataAvailable)
            try device.lock()
            check("in grace")
            #expect(device.isProtectedDataAvailable)
            fixture.clock.advance(by: .seconds(10))
            check("after grace")
            #expect(!device.isProtectedDataAvailable)
            try device.unlock(passcode: "1234")
            check("unlocked again")
            try device.reboot()
            check("booted")
            #expect(!device.isProtectedDataAvailable)
        }
    }
}
