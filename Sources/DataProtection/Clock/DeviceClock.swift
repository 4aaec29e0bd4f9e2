import SodiumBridge

/// An instant on a ``DeviceClock``: nanoseconds since the clock's origin
/// (the Unix epoch for ``SystemClock``, zero for a fresh ``VirtualClock``).
public struct DeviceInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the clock's origin.
    public var nanoseconds: Int64

    /// The instant `nanoseconds` after the origin.
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    /// The clock's origin.
    public static let zero = DeviceInstant(nanoseconds: 0)

    /// Whether `lhs` comes before `rhs`.
    public static func < (lhs: DeviceInstant, rhs: DeviceInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    /// The instant `duration` later (saturating).
    public static func + (lhs: DeviceInstant, rhs: Duration) -> DeviceInstant {
        let (sum, overflow) = lhs.nanoseconds.addingReportingOverflow(rhs.nanoseconds)
        return DeviceInstant(nanoseconds: overflow ? (rhs > .zero ? .max : .min) : sum)
    }

    /// The duration from `self` to `other`.
    public func duration(to other: DeviceInstant) -> Duration {
        .nanoseconds(other.nanoseconds &- nanoseconds)
    }

    public var description: String { "\(Duration.nanoseconds(nanoseconds)) after origin" }
}

extension Duration {
    /// Whole nanoseconds, saturating at `Int64` bounds.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflow2 ? (seconds < 0 ? .min : .max) : sum
    }
}

/// The time source of a ``Device``: grace periods, inactivity expiry and
/// passcode delays are measured on it.
///
/// Inject ``VirtualClock`` in tests (its `advance` fires due expiries
/// deterministically; nothing sleeps) and use ``SystemClock`` otherwise.
public protocol DeviceClock: AnyObject, Sendable {
    /// The current instant.
    var now: DeviceInstant { get }
    /// Arranges for `action` to run once at (or soon after) `deadline`.
    /// Cancelling the returned token before then prevents it.
    func wake(at deadline: DeviceInstant, _ action: @escaping @Sendable () -> Void) -> ClockWakeToken
}

/// A pending wake-up scheduled on a ``DeviceClock``.
public final class ClockWakeToken: Sendable {
    private let cancelled = Locked(false)

    /// Creates a token (clock implementations only).
    public init() {}

    /// Prevents the wake-up if it has not run yet.
    public func cancel() { cancelled.withLock { $0 = true } }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { cancelled.withLock { $0 } }
}
