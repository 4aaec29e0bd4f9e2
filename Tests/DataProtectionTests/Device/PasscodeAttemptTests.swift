import Foundation
import Testing
@testable import DataProtection

/// semantics.md, "Passcode attempts": counting, repeats and the escalating delays.
@Suite("Passcode attempts")
struct PasscodeAttemptTests {
    /// (consecutive failures, delay before the next attempt)
    static let schedule: [(Int, Duration)] = [
        (1, .zero), (2, .zero), (3, .zero), (4, .zero),
        (5, .seconds(60)), (6, .seconds(5 * 60)), (7, .seconds(15 * 60)), (8, .seconds(15 * 60)),
        (9, .seconds(3600)), (10, .seconds(3600)), (11, .seconds(3600)), (15, .seconds(3600)),
    ]

    @Test("the delay after n failures; allowed exactly at last failure + delay", arguments: schedule)
    func delaySchedule(_ failures: Int, _ delay: Duration) throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.fail(failures)
            #expect(fixture.device.failedPasscodeAttempts == failures)
            let lastFailure = fixture.clock.now
            if delay == .zero {
                #expect(fixture.device.nextPasscodeAttemptAllowed == nil)
                expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "not delayed") }
                #expect(fixture.device.failedPasscodeAttempts == failures + 1)
                return
            }
            #expect(fixture.device.nextPasscodeAttemptAllowed == lastFailure + delay)
            fixture.clock.advance(by: delay - .milliseconds(1))
            let error = expectError(.passcodeAttemptsDelayed) { try fixture.device.unlock(passcode: "too early") }
            #expect(error?.retryAfter == .milliseconds(1))
            #expect(fixture.device.failedPasscodeAttempts == failures, "a delayed attempt was counted")
            fixture.clock.advance(by: .milliseconds(1))
            #expect(fixture.device.nextPasscodeAttemptAllowed == nil)
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "on time") }
            #expect(fixture.device.failedPasscodeAttempts == failures + 1)
        }
    }

    @Test("the delay is measured from the last failure, and retryAfter is what is left")
    func retryAfterShrinks() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.fail(6)
            fixture.clock.advance(by: .seconds(100))
            let error = expectError(.passcodeAttemptsDelayed) { try fixture.device.unlock(passcode: "x") }
            #expect(error?.retryAfter == .seconds(200))
        }
    }

    @Test("inside a delay even the right passcode is refused, and not counted")
    func rightPasscodeDelayed() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.fail(5)
            expectError(.passcodeAttemptsDelayed) { try fixture.device.unlock(passcode: "1234") }
            #expect(fixture.device.state == .locked)
            #expect(fixture.device.failedPasscodeAttempts == 5)
            fixture.waitForNextAttempt()
            try fixture.device.unlock(passcode: "1234")
            #expect(fixture.device.failedPasscodeAttempts == 0)
        }
    }

    @Test("delayed attempts do not extend the delay")
    func delayedAttemptsDoNotExtend() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.fail(5)
            let allowed = fixture.device.nextPasscodeAttemptAllowed
            for second in 1...5 {
                fixture.clock.advance(by: .seconds(10))
                expectError(.passcodeAttemptsDelayed) { try fixture.device.unlock(passcode: "x\(second)") }
            }
            #expect(fixture.device.nextPasscodeAttemptAllowed == allowed)
        }
    }

    @Test("the same wrong passcode repeated right after itself is not counted again")
    func repeatNotCounted() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "1111") }
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "1111") }
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "1111") }
            #expect(fixture.device.failedPasscodeAttempts == 1)
        }
    }

    @Test("a wrong passcode repeated after another wrong one is counted")
    func nonAdjacentRepeatCounted() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            for passcode in ["1111", "2222", "1111"] {
                expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: passcode) }
            }
            #expect(fixture.device.failedPasscodeAttempts == 3)
        }
    }

    @Test("a repeat is recognised across a process restart")
    func repeatAcrossRestart() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "1111") }
            try fixture.reopen()
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "1111") }
            #expect(fixture.device.failedPasscodeAttempts == 1)
        }
    }

    @Test("a repeat does not restart the delay")
    func repeatDoesNotRestartDelay() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.fail(4)
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "5555") }
            let allowed = try #require(fixture.device.nextPasscodeAttemptAllowed)
            fixture.clock.advance(to: allowed)
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "5555") }
            #expect(fixture.device.failedPasscodeAttempts == 5)
            #expect(fixture.device.nextPasscodeAttemptAllowed == nil)
        }
    }

    @Test("attempts refused for the delay do not break the repeat")
    func delayedAttemptKeepsRepeat() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.fail(4)
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "5555") }
            #expect(fixture.device.failedPasscodeAttempts == 5)
            expectError(.passcodeAttemptsDelayed) { try fixture.device.unlock(passcode: "9999") }
            fixture.waitForNextAttempt()
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "5555") }
            #expect(fixture.device.failedPasscodeAttempts == 5)
        }
    }

    @Test("a successful unlock resets the count to 0, and the next wrong passcode counts again")
    func successResets() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "1111") }
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "2222") }
            try fixture.device.unlock(passcode: "1234")
            #expect(fixture.device.failedPasscodeAttempts == 0)
            try fixture.device.lock()
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "2222") }
            #expect(fixture.device.failedPasscodeAttempts == 1, "the repeat memory survived a successful unlock")
        }
    }

    @Test("the reset is durable")
    func resetDurable() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.fail(3)
            try fixture.device.unlock(passcode: "1234")
            try fixture.reopen()
            #expect(fixture.device.failedPasscodeAttempts == 0)
        }
    }

    @Test("a right passcode while already unlocked resets the count too")
    func unlockWhenUnlockedResets() throws {
        try withDevice(passcode: "1234") { fixture in
            fixture.fail(2)
            try fixture.device.unlock(passcode: "1234")
            #expect(fixture.device.failedPasscodeAttempts == 0)
        }
    }

    @Test("a bare unlock is an attempt with the empty passcode")
    func bareUnlockIsEmptyPasscode() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            expectError(.incorrectPasscode) { try fixture.device.unlock() }
            #expect(fixture.device.failedPasscodeAttempts == 1)
            // The same attempt again, spelt differently: a repeat.
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "") }
            #expect(fixture.device.failedPasscodeAttempts == 1)
        }
    }

    @Test("a non-empty passcode on a device without a passcode is incorrectPasscode, not counted")
    func passcodeOnDeviceWithout() throws {
        try withDevice { fixture in
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: "1234") }
            #expect(fixture.device.failedPasscodeAttempts == 0)
            #expect(fixture.device.state == .booted)
            try fixture.device.unlock()
            #expect(fixture.device.failedPasscodeAttempts == 0)
        }
    }

    @Test("a passcode close to the right one is wrong", arguments: ["abC", "abC45", "abC5", " abC4", "abC4 ", "abc4", "ABC4"])
    func nearMisses(_ passcode: String) throws {
        try withDevice(passcode: "abC4") { fixture in
            try fixture.device.lock()
            expectError(.incorrectPasscode) { try fixture.device.unlock(passcode: passcode) }
            try fixture.device.unlock(passcode: "abC4")
        }
    }

    @Test("failures are counted across reboots, crashes and process restarts",
          arguments: RestartTests.Restart.allCases)
    func countSurvivesRestarts(_ restart: RestartTests.Restart) throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            fixture.fail(3)
            try restart.perform(on: fixture)
            #expect(fixture.device.failedPasscodeAttempts == 3)
            fixture.fail(2, prefix: "after")
            #expect(fixture.device.failedPasscodeAttempts == 5)
            #expect(fixture.device.nextPasscodeAttemptAllowed == fixture.clock.now + .seconds(60))
        }
    }
}
