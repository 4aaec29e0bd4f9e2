import SodiumBridge

/// A clock that moves only when told to, for tests and scenarios.
///
/// ``advance(by:)`` walks time forward through every wake-up that falls due,
/// in deadline order (then scheduling order), running each at its own instant
/// on the calling thread, and returns once everything due has run.
public final class VirtualClock: DeviceClock {
    private struct Pending {
        let deadline: DeviceInstant
        let sequence: UInt64
        let token: ClockWakeToken
        let action: @Sendable () -> Void
    }

    private struct State {
        var now: DeviceInstant
        var nextSequence: UInt64 = 0
        var pending: [Pending] = []
    }

    private let state: Locked<State>

    /// A clock reading `start` (default: zero).
    public init(start: DeviceInstant = .zero) {
        state = Locked(State(now: start))
    }

    /// The current instant.
    public var now: DeviceInstant { state.withLock { $0.now } }

    /// Runs `action` at `deadline` (or at once if it has passed), unless the returned token is cancelled first.
    public func wake(at deadline: DeviceInstant, _ action: @escaping @Sendable () -> Void) -> ClockWakeToken {
        let token = ClockWakeToken()
        state.withLock { state in
            state.pending.append(Pending(deadline: deadline, sequence: state.nextSequence, token: token, action: action))
            state.nextSequence += 1
        }
        return token
    }

    /// Moves time forward by `duration`, firing what falls due on the way.
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a virtual clock does not go backwards")
        advance(to: now + duration)
    }

    /// Moves time forward to `target`, firing what falls due on the way.
    public func advance(to target: DeviceInstant) {
        while let next = popDue(before: target) {
            if !next.token.isCancelled { next.action() }
        }
        state.withLock { state in
            if state.now < target { state.now = target }
        }
    }

    private func popDue(before target: DeviceInstant) -> Pending? {
        state.withLock { state in
            state.pending.removeAll { $0.token.isCancelled }
            guard let index = state.pending.indices.min(by: {
                (state.pending[$0].deadline, state.pending[$0].sequence) < (state.pending[$1].deadline, state.pending[$1].sequence)
            }), state.pending[index].deadline <= target else { return nil }
            let next = state.pending.remove(at: index)
            if state.now < next.deadline { state.now = next.deadline }
            return next
        }
    }
}
