import Foundation
import SodiumBridge
import Testing
@testable import DataProtection

/// The virtual clock drives every deadline in the device tests, so its own
/// rules are checked here: time moves only on `advance`, wake-ups fire at their
/// own instant, in deadline then scheduling order, and cancelled ones never.
@Suite("Virtual clock")
struct VirtualClockTests {
    /// Records (label, the clock's reading when the wake-up ran).
    final class Log: Sendable {
        private let entries = Locked<[(String, DeviceInstant)]>([])
        func append(_ label: String, _ now: DeviceInstant) { entries.withLock { $0.append((label, now)) } }
        var labels: [String] { entries.withLock { $0.map(\.0) } }
        var instants: [DeviceInstant] { entries.withLock { $0.map(\.1) } }
    }

    static func at(_ seconds: Int64) -> DeviceInstant { DeviceInstant(nanoseconds: seconds * 1_000_000_000) }

    @Test("starts at zero (or the given start) and moves only when advanced")
    func startsAndAdvances() {
        #expect(VirtualClock().now == .zero)
        let clock = VirtualClock(start: Self.at(5))
        #expect(clock.now == Self.at(5))
        clock.advance(by: .seconds(3))
        #expect(clock.now == Self.at(8))
        clock.advance(by: .zero)
        #expect(clock.now == Self.at(8))
    }

    @Test("advance(to:) an earlier instant does not go back")
    func neverBackwards() {
        let clock = VirtualClock(start: Self.at(10))
        clock.advance(to: Self.at(3))
        #expect(clock.now == Self.at(10))
    }

    @Test("wake-ups run at their own instant, in deadline order, then in scheduling order")
    func order() {
        let clock = VirtualClock()
        let log = Log()
        for (label, seconds) in [("c", 3), ("a", 1), ("b1", 2), ("b2", 2)] as [(String, Int64)] {
            _ = clock.wake(at: Self.at(seconds)) { log.append(label, clock.now) }
        }
        clock.advance(by: .seconds(10))
        #expect(log.labels == ["a", "b1", "b2", "c"])
        #expect(log.instants == [Self.at(1), Self.at(2), Self.at(2), Self.at(3)])
        #expect(clock.now == Self.at(10))
    }

    @Test("a wake-up exactly at the target runs; one just after does not")
    func boundary() {
        let clock = VirtualClock()
        let log = Log()
        _ = clock.wake(at: Self.at(5)) { log.append("at", clock.now) }
        _ = clock.wake(at: Self.at(5) + .nanoseconds(1)) { log.append("after", clock.now) }
        clock.advance(to: Self.at(5))
        #expect(log.labels == ["at"])
        clock.advance(by: .nanoseconds(1))
        #expect(log.labels == ["at", "after"])
    }

    @Test("a cancelled wake-up never runs")
    func cancel() {
        let clock = VirtualClock()
        let log = Log()
        let token = clock.wake(at: Self.at(1)) { log.append("cancelled", clock.now) }
        _ = clock.wake(at: Self.at(2)) { log.append("kept", clock.now) }
        token.cancel()
        #expect(token.isCancelled)
        clock.advance(by: .seconds(5))
        #expect(log.labels == ["kept"])
    }

    @Test("a wake-up scheduled by a wake-up, inside the advanced span, runs in the same advance")
    func chained() {
        let clock = VirtualClock()
        let log = Log()
        _ = clock.wake(at: Self.at(1)) {
            log.append("first", clock.now)
            _ = clock.wake(at: Self.at(4)) { log.append("second", clock.now) }
        }
        clock.advance(by: .seconds(5))
        #expect(log.labels == ["first", "second"])
        #expect(log.instants == [Self.at(1), Self.at(4)])
    }

    @Test("a wake-up in the past runs on the next advance, at the current instant")
    func pastDeadline() {
        let clock = VirtualClock(start: Self.at(10))
        let log = Log()
        _ = clock.wake(at: Self.at(2)) { log.append("late", clock.now) }
        clock.advance(by: .zero)
        #expect(log.labels == ["late"])
        #expect(log.instants == [Self.at(10)])
    }

    @Test("instant arithmetic saturates instead of overflowing")
    func saturation() {
        let late = DeviceInstant(nanoseconds: .max - 1)
        #expect(late + .seconds(10) == DeviceInstant(nanoseconds: .max))
        let early = DeviceInstant(nanoseconds: .min + 1)
        #expect(early + .seconds(-10) == DeviceInstant(nanoseconds: .min))
        #expect(Self.at(1).duration(to: Self.at(3)) == .seconds(2))
        #expect(Self.at(3).duration(to: Self.at(1)) == .seconds(-2))
    }
}
