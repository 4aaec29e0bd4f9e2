import Dispatch
import Foundation

/// Wall-clock time, so that passcode delays stored on disk keep their meaning
/// across process restarts. Wake-ups run on a background dispatch queue.
public final class SystemClock: DeviceClock {
    /// The shared system clock.
    public static let shared = SystemClock()

    /// Creates a system clock.
    public init() {}

    /// The current instant.
    public var now: DeviceInstant {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return DeviceInstant(nanoseconds: Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec))
    }

    /// Runs `action` at `deadline` (or at once if it has passed), unless the returned token is cancelled first.
    public func wake(at deadline: DeviceInstant, _ action: @escaping @Sendable () -> Void) -> ClockWakeToken {
        let token = ClockWakeToken()
        let delay = max(0, deadline.nanoseconds - now.nanoseconds)
        DispatchQueue.global(qos: .userInitiated).asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: delay))) {
            if !token.isCancelled { action() }
        }
        return token
    }
}
