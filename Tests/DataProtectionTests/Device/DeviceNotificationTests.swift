import Foundation
import SodiumBridge
import Testing
@testable import DataProtection

/// semantics.md, "Device states": what `lock`, `unlock`, `reboot`, `crash`
/// and `erase` post, in which order, and what observers can still see.
@Suite("Device notifications")
struct DeviceNotificationTests {
    @Test("the first unlock posts protectedDataDidBecomeAvailable once, with data available")
    func firstUnlock() throws {
        try withDevice { fixture in
            let recorder = DeviceEventRecorder(fixture.device)
            try fixture.device.unlock()
            #expect(recorder.events == [.notification(.protectedDataDidBecomeAvailable, protectedDataAvailable: true)])
        }
    }

    @Test("lock posts protectedDataWillBecomeUnavailable at once, while data is still available")
    func lockPostsAtOnce() throws {
        try withDevice(.testing(grace: .seconds(10)), passcode: "1234") { fixture in
            let recorder = DeviceEventRecorder(fixture.device)
            try fixture.device.lock()
            #expect(recorder.notifications == [.protectedDataWillBecomeUnavailable])
            fixture.clock.advance(by: .seconds(10))
            #expect(recorder.notifications == [.protectedDataWillBecomeUnavailable], "the key discard posted again")
        }
    }

    @Test("with grace 0, willBecomeUnavailable observers run before any key is discarded")
    func observersRunBeforeDiscard() throws {
        try withDevice(passcode: "1234") { fixture in
            let recorder = DeviceEventRecorder(fixture.device)
            try fixture.device.lock()
            #expect(recorder.events == [
                .notification(.protectedDataWillBecomeUnavailable, protectedDataAvailable: true),
                .willDiscard([.complete, .completeUnlessOpen], keysPresent: true),
            ])
            #expect(fixture.device.keyFingerprint(.complete) == nil)
            #expect(fixture.device.keyFingerprint(.completeUnlessOpenSecret) == nil)
        }
    }

    @Test("lifecycle observers are told before each key discard, with the keys still present")
    func lifecycleBeforeEveryDiscard() throws {
        try withDevice(.testing(grace: .seconds(10), inactivity: .seconds(3600)), passcode: "1234") { fixture in
            let recorder = DeviceEventRecorder(fixture.device)
            try fixture.device.lock()
            fixture.clock.advance(by: .seconds(10))
            fixture.clock.advance(by: .seconds(3600))
            #expect(recorder.events == [
                .notification(.protectedDataWillBecomeUnavailable, protectedDataAvailable: true),
                .willDiscard([.complete, .completeUnlessOpen], keysPresent: true),
                .willDiscard([.completeWhenUserInactive], keysPresent: true),
            ])
        }
    }

    @Test("unlock after lock posts protectedDataDidBecomeAvailable with data available")
    func unlockAfterLock() throws {
        try withDevice(passcode: "1234") { fixture in
            try fixture.device.lock()
            let recorder = DeviceEventRecorder(fixture.device)
            try fixture.device.unlock(passcode: "1234")
            #expect(recorder.events == [.notification(.protectedDataDidBecomeAvailable, protectedDataAvailable: true)])
        }
    }

    @Test("unlock inside the grace period posts didBecomeAvailable and discards nothing later")
    func unlockInsideGrace() throws {
        try withDevice(.testing(grace: .seconds(10)), passcode: "1234") { fixture in
            let recorder = DeviceEventRecorder(fixture.device)
            try fixture.device.lock()
            fixture.clock.advance(by: .seconds(1))
            try fixture.device.unlock(passcode: "1234")
            fixture.clock.advance(by: .seconds(100))
            #expect(recorder.events == [
                .notification(.protectedDataWillBecomeUnavailable, protectedDataAvailable: true),
                .notification(.protectedDataDidBecomeAvailable, protectedDataAvailable: true),
            ])
        }
    }

    @Test("reboot, crash and erase post no notification", arguments: ["reboot", "crash", "erase"])
    func restartsPostNothing(_ operation: String) throws {
        try withDevice(passcode: "1234") { fixture in
            let recorder = DeviceEventRecorder(fixture.device)
            switch operation {
            case "reboot":
                try fixture.device.reboot()
                #expect(recorder.events == [.willRestart(flushing: true)])
            case "crash":
                try fixture.device.crash()
                #expect(recorder.events == [.willRestart(flushing: false)])
            default:
                try fixture.device.erase()
                #expect(recorder.events == [.willErase])
            }
            #expect(recorder.notifications.isEmpty)
        }
    }

    @Test("observers see every notification in order; a cancelled observer sees no more")
    func observerOrderAndCancel() throws {
        try withDevice(passcode: "1234") { fixture in
            let seen = Locked<[DeviceNotification]>([])
            let observation = fixture.device.addObserver { note in seen.withLock { $0.append(note) } }
            try fixture.device.lock()
            try fixture.device.unlock(passcode: "1234")
            try fixture.device.lock()
            observation.cancel()
            try fixture.device.unlock(passcode: "1234")
            #expect(seen.withLock { $0 } == [
                .protectedDataWillBecomeUnavailable, .protectedDataDidBecomeAvailable, .protectedDataWillBecomeUnavailable,
            ])
        }
    }

    @Test("an observer whose token is dropped keeps observing until cancel (as with NotificationCenter)")
    func droppedTokenKeepsObserving() throws {
        try withDevice(passcode: "1234") { fixture in
            let seen = Locked<[DeviceNotification]>([])
            _ = fixture.device.addObserver { note in seen.withLock { $0.append(note) } }
            fixture.device.addObserver { _ in seen.withLock { $0.append(.protectedDataDidBecomeAvailable) } }.cancel()
            try fixture.device.lock()
            try fixture.device.unlock(passcode: "1234")
            #expect(seen.withLock { $0 } == [.protectedDataWillBecomeUnavailable, .protectedDataDidBecomeAvailable])
        }
    }

    @Test("synchronous observers run in registration order")
    func registrationOrder() throws {
        try withDevice(passcode: "1234") { fixture in
            let seen = Locked<[Int]>([])
            let observations = (0..<3).map { index in
                fixture.device.addObserver { _ in seen.withLock { $0.append(index) } }
            }
            try fixture.device.lock()
            #expect(seen.withLock { $0 } == [0, 1, 2])
            withExtendedLifetime(observations) {}
        }
    }

    // The limit ends a hang (a notification never delivered leaves the iterator waiting); it
    // does not time the test (0.3 s alone). In the full parallel run, long synchronous suites
    // hold the 2 threads of Swift's cooperative pool and this async test waits for one for most
    // of the run (503-524 s seen in CI on 27 Nov, with a 1-minute limit that then fired), so the
    // bound is the one the documentation build test uses.
    @Test("notifications() delivers the same notifications, in the same order, as addObserver",
          .timeLimit(.minutes(20)))
    func asyncStream() async throws {
        try await withScratchDirectory { root in
            let fixture = try DeviceFixture(root: root, configuration: .testing(), passcode: "1234")
            let device = fixture.device
            let stream = device.notifications()
            let recorder = DeviceEventRecorder(device)
            try device.lock()                           // will
            try await device.unlock(passcode: "1234")         // did
            try await device.unlock(passcode: "1234")         // nothing: already unlocked
            try device.reboot()                         // nothing
            try device.lock()                           // nothing: booted
            try await device.unlock(passcode: "1234")         // did
            try device.crash()                          // nothing
            try await device.unlock(passcode: "1234")         // did
            try device.lock()                           // will
            try device.lock()                           // nothing: locked
            try device.erase()                          // nothing
            try await device.unlock()                         // did
            let expected: [DeviceNotification] = [
                .protectedDataWillBecomeUnavailable, .protectedDataDidBecomeAvailable,
                .protectedDataDidBecomeAvailable, .protectedDataDidBecomeAvailable,
                .protectedDataWillBecomeUnavailable, .protectedDataDidBecomeAvailable,
            ]
            #expect(recorder.notifications == expected)
            var iterator = stream.makeAsyncIterator()
            var received: [DeviceNotification] = []
            for _ in expected {
                if let next = await iterator.next() { received.append(next) }
            }
            #expect(received == expected)
        }
    }

    // The same bound, for the same reason (above).
    @Test("each notifications() stream gets every notification", .timeLimit(.minutes(20)))
    func twoStreams() async throws {
        try await withScratchDirectory { root in
            let fixture = try DeviceFixture(root: root, configuration: .testing(), passcode: "1234")
            let first = fixture.device.notifications()
            let second = fixture.device.notifications()
            try fixture.device.lock()
            try await fixture.device.unlock(passcode: "1234")
            for stream in [first, second] {
                var iterator = stream.makeAsyncIterator()
                #expect(await iterator.next() == .protectedDataWillBecomeUnavailable)
                #expect(await iterator.next() == .protectedDataDidBecomeAvailable)
            }
        }
    }
}
