import DBusBridge
import DataProtection
import Foundation
import Logging
import Synchronization

extension AgentServer {
    /// Starts following the login session as `configuration` asks (`nil`: ``SessionFollowing/never``).
    ///
    /// - Throws: `ioFailure` when following is ``SessionFollowing/required`` and neither logind
    ///   nor a session bus can be reached.
    static func followSession(_ device: Device, _ configuration: Configuration, relay: AgentSessionEventRelay)
        throws(DataProtectionError) -> LoginSessionFollower? {
        guard configuration.sessionFollowing != .never else { return nil }
        let buses = LoginSessionFollower.Buses(
            system: configuration.systemBusAddress.map(DBusConnection.Bus.address) ?? .system,
            session: configuration.sessionBusAddress.map(DBusConnection.Bus.address) ?? .session,
            sessionIdentifier: configuration.loginSessionIdentifier)
        let follower = LoginSessionFollower(device: device, buses: buses, logger: Logger(label: "DataProtection.agent")) { event in
            relay.post(event)
        }
        if configuration.sessionFollowing == .required && !follower.following.isFollowing {
            follower.stop()
            throw DataProtectionError(
                .ioFailure, "The agent cannot follow the session: neither logind on the system bus nor a session bus answers.",
                hint: "Set DBUS_SYSTEM_BUS_ADDRESS or DBUS_SESSION_BUS_ADDRESS, or start without --lock-with-session (the auto-lock then remains).")
        }
        return follower
    }

    /// What of the session is followed, as `status` reports it.
    var sessionFollowing: AgentSessionFollowing {
        sessionFollower?.following ?? AgentSessionFollowing(sources: [])
    }

    /// Tells the service manager the agent is ready and keeps its `STATUS=` on the lock state
    /// until the observation is cancelled.
    func reportStateToServiceManager() -> DeviceObservation {
        let device = store.device
        let observation = device.addObserver { notification in
            ServiceManagerNotification.status(notification == .protectedDataDidBecomeAvailable ? "unlocked" : "locked")
        }
        ServiceManagerNotification.ready(status: device.state.rawValue)
        return observation
    }
}

/// Session events on their way to the watching connections.
final class AgentSessionEventRelay: Sendable {
    private let observers = Mutex<(next: UInt64, handlers: [UInt64: @Sendable (AgentSessionEvent) -> Void])>((0, [:]))

    /// Calls `handler` with every event posted from now on, until the returned cancel runs.
    func observe(_ handler: @escaping @Sendable (AgentSessionEvent) -> Void) -> @Sendable () -> Void {
        let id = observers.withLock { observers in
            observers.next += 1
            observers.handlers[observers.next] = handler
            return observers.next
        }
        return { [self] in _ = observers.withLock { $0.handlers.removeValue(forKey: id) } }
    }

    func post(_ event: AgentSessionEvent) {
        for handler in observers.withLock({ Array($0.handlers.values) }) { handler(event) }
    }
}
