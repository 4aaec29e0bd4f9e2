import DBusBridge
import DataProtection
import Foundation
import Logging
import Synchronization

/// Follows the login session an agent runs in and locks its device with it
/// (`semantics.md`, "Processes and the agent").
///
/// On the system bus, logind (`org.freedesktop.login1`): the session's `Lock` signal and its
/// `LockedHint` becoming true lock the device (the grace period applies); the manager's
/// `PrepareForSleep(true)` locks it and discards the class A and B keys at once. On the session
/// bus, `ActiveChanged(true)` of `org.freedesktop.ScreenSaver` or `org.gnome.ScreenSaver` locks it.
/// Nothing here ever unlocks: `Unlock`, `LockedHint` false and `ActiveChanged(false)` are only
/// reported (a front end may prompt for the passcode), and a bus that goes away is reported.
package final class LoginSessionFollower: Sendable {
    /// Where to look for the session.
    package struct Buses: Sendable, Hashable {
        /// The bus logind is on (`nil`: no system bus is followed).
        package var system: DBusConnection.Bus?
        /// The bus the screensavers are on (`nil`: none is followed).
        package var session: DBusConnection.Bus?
        /// The logind session's identifier (`nil`: `$XDG_SESSION_ID`, else logind's session of this process).
        package var sessionIdentifier: String?

        package init(system: DBusConnection.Bus? = .system, session: DBusConnection.Bus? = .session, sessionIdentifier: String? = nil) {
            self.system = system
            self.session = session
            self.sessionIdentifier = sessionIdentifier
        }
    }

    static let login1 = "org.freedesktop.login1"
    static let screensavers = ["org.freedesktop.ScreenSaver", "org.gnome.ScreenSaver"]

    private let device: Device
    private let post: @Sendable (AgentSessionEvent) -> Void
    private let logger: Logger
    private let followed = Mutex(AgentSessionFollowing(sources: []))
    private let connections = Mutex<[DBusConnection]>([])
    private let stopped = Mutex(false)

    /// Connects to the buses of `buses` that answer and follows what it finds there; reports
    /// every change through `post` (on a bus's thread, after the device has locked).
    package init(device: Device, buses: Buses, logger: Logger, post: @escaping @Sendable (AgentSessionEvent) -> Void) {
        self.device = device
        self.post = post
        self.logger = logger
        if let system = buses.system { followLogind(on: system, sessionIdentifier: buses.sessionIdentifier) }
        if let session = buses.session { followScreensavers(on: session) }
    }

    /// What is followed now.
    package var following: AgentSessionFollowing { followed.withLock { $0 } }

    /// Stops following: the connections close (no bus loss is reported).
    package func stop() {
        stopped.withLock { $0 = true }
        for connection in connections.withLock({ $0 }) { connection.close() }
    }

    // MARK: - logind

    private func followLogind(on bus: DBusConnection.Bus, sessionIdentifier: String?) {
        let connection: DBusConnection
        do {
            connection = try DBusConnection(bus)
        } catch {
            logger.info("agent: no system bus, logind not followed", metadata: ["bus": "\(bus)", "error": "\(error)"])
            return
        }
        let manager = "/org/freedesktop/login1"
        let identifier = sessionIdentifier ?? ProcessInfo.processInfo.environment["XDG_SESSION_ID"].flatMap { $0.isEmpty ? nil : $0 }
        let sessionPath: String?
        do {
            let reply = if let identifier {
                try connection.call(Self.login1, path: manager, interface: "org.freedesktop.login1.Manager", member: "GetSession",
                                    [.string(identifier)], timeout: .seconds(5))
            } else {
                try connection.call(Self.login1, path: manager, interface: "org.freedesktop.login1.Manager", member: "GetSessionByPID",
                                    [.uint32(UInt32(bitPattern: getpid()))], timeout: .seconds(5))
            }
            sessionPath = reply.first?.stringValue
        } catch where error.name == "org.freedesktop.DBus.Error.ServiceUnknown" || error.name == "org.freedesktop.DBus.Error.NameHasNoOwner" {
            logger.info("agent: logind is not on the system bus, not followed", metadata: ["bus": "\(bus)"])
            connection.close()
            return
        } catch {
            logger.info("agent: no logind session for this process", metadata: ["error": "\(error)"])
            sessionPath = nil
        }
        var sources: [String] = []
        do {
            _ = try connection.matchSignal(path: manager, interface: "org.freedesktop.login1.Manager", member: "PrepareForSleep") { [self] message in
                if message.arguments.first?.boolValue == true { lock(.sleeping, "login1 PrepareForSleep") }
            }
            sources.append("login1 sleep (\(bus))")
            if let sessionPath {
                let session = "org.freedesktop.login1.Session"
                _ = try connection.matchSignal(path: sessionPath, interface: session, member: "Lock") { [self] _ in
                    lock(.locked, "login1 Lock")
                }
                _ = try connection.matchSignal(path: sessionPath, interface: session, member: "Unlock") { [self] _ in
                    report(.unlocked, "login1 Unlock")
                }
                _ = try connection.matchSignal(path: sessionPath, interface: "org.freedesktop.DBus.Properties",
                                               member: "PropertiesChanged") { [self] message in
                    guard message.arguments.first?.stringValue == session,
                          let hint = message.arguments.dropFirst().first?.stringKeyedDictionary?["LockedHint"]?.boolValue else { return }
                    if hint { lock(.locked, "login1 LockedHint") } else { report(.unlocked, "login1 LockedHint") }
                }
                sources.insert("login1 session \(sessionPath.split(separator: "/").last ?? "") (\(bus))", at: 0)
            }
        } catch {
            logger.warning("agent: cannot follow logind", metadata: ["error": "\(error)"])
            connection.close()
            return
        }
        adopt(connection, sources: sources, bus: bus)
    }

    // MARK: - Screensavers

    private func followScreensavers(on bus: DBusConnection.Bus) {
        let connection: DBusConnection
        do {
            connection = try DBusConnection(bus)
        } catch {
            logger.info("agent: no session bus, screensavers not followed", metadata: ["bus": "\(bus)", "error": "\(error)"])
            return
        }
        do {
            for interface in Self.screensavers {
                _ = try connection.matchSignal(interface: interface, member: "ActiveChanged") { [self] message in
                    guard let active = message.arguments.first?.boolValue else { return }
                    if active { lock(.locked, "\(interface) ActiveChanged") } else { report(.unlocked, "\(interface) ActiveChanged") }
                }
            }
        } catch {
            logger.warning("agent: cannot follow the screensavers", metadata: ["error": "\(error)"])
            connection.close()
            return
        }
        adopt(connection, sources: ["screensavers (\(bus))"], bus: bus)
    }

    // MARK: - Common

    /// Keeps `connection` and its `sources`; its loss is reported and removes them.
    private func adopt(_ connection: DBusConnection, sources: [String], bus: DBusConnection.Bus) {
        connections.withLock { $0.append(connection) }
        followed.withLock { $0.sources += sources }
        logger.info("agent: following the session", metadata: ["sources": "\(sources)"])
        connection.whenDisconnected { [self] in
            guard !stopped.withLock({ $0 }) else { return }
            followed.withLock { following in
                following.sources.removeAll { sources.contains($0) }
                following.lostBuses.append("\(bus)")
            }
            logger.warning("agent: the \(bus) went away: its session locks are no longer followed (nothing was unlocked)")
            post(AgentSessionEvent(change: .busLost, source: "\(bus)"))
        }
    }

    private func lock(_ change: AgentSessionEvent.Change, _ source: String) {
        logger.info("agent: the session locked, locking", metadata: ["source": "\(source)"])
        do {
            if change == .sleeping { try device.lockDiscardingKeys() } else { try device.lock() }
        } catch {
            logger.error("agent: locking for the session failed", metadata: ["source": "\(source)", "error": "\(error)"])
        }
        post(AgentSessionEvent(change: change, source: source))
    }

    private func report(_ change: AgentSessionEvent.Change, _ source: String) {
        logger.info("agent: the session unlocked; the device stays locked", metadata: ["source": "\(source)"])
        post(AgentSessionEvent(change: change, source: source))
    }
}
