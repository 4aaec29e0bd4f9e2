import Foundation

/// A change of the login session an agent follows, as a watching client receives it
/// (`Keys/agent-protocol.md` §5, status 4): what a front end shows or prompts on.
public struct AgentSessionEvent: Sendable, Hashable {
    /// What happened.
    public enum Change: String, Sendable, Hashable, CaseIterable {
        /// The session locked (logind's `Lock`, `LockedHint` true, a screensaver turning on):
        /// the agent locked its device (the grace period applies).
        case locked = "sessionLocked"
        /// The machine prepares to sleep: the agent locked its device and discarded the
        /// class A and B keys at once.
        case sleeping = "sessionSleeping"
        /// The session unlocked (logind's `Unlock`, a screensaver turning off): the device stays
        /// locked, the passcode is still needed (a front end may prompt for it now).
        case unlocked = "sessionUnlocked"
        /// A bus the agent followed the session on went away: nothing was unlocked, and no
        /// lock of the session arrives on that bus any more (the auto-lock remains).
        case busLost = "sessionBusLost"
    }

    /// What happened.
    public var change: Change
    /// Where it came from, e.g. `login1 Lock`, `org.gnome.ScreenSaver ActiveChanged`, `system bus`.
    public var source: String
    /// When the agent received it, in nanoseconds since 1970.
    public var nanosecondsSince1970: Int64
    /// When the agent received it.
    public var date: Date { Date(timeIntervalSince1970: Double(nanosecondsSince1970) / 1e9) }

    /// An event as the wire carries it.
    public init(change: Change, source: String, nanosecondsSince1970: Int64) {
        self.change = change
        self.source = source
        self.nanosecondsSince1970 = nanosecondsSince1970
    }

    /// An event received at `date`.
    public init(change: Change, source: String, date: Date = Date()) {
        self.init(change: change, source: source,
                  nanosecondsSince1970: Int64(exactly: (date.timeIntervalSince1970 * 1e9).rounded()) ?? 0)
    }
}

/// What of the login session an agent follows, as `status` reports it (§6).
public struct AgentSessionFollowing: Sendable, Hashable {
    /// The lock sources followed now, e.g. `login1 session 2 (system bus)`,
    /// `screensavers (session bus)`. Empty: the session is not followed.
    public var sources: [String]
    /// The buses that went away since the agent started (their sources are no longer followed).
    public var lostBuses: [String]

    /// What is followed: `sources`, and `lostBuses` gone.
    public init(sources: [String], lostBuses: [String] = []) {
        self.sources = sources
        self.lostBuses = lostBuses
    }

    /// Whether anything of the session is followed now.
    public var isFollowing: Bool { !sources.isEmpty }

    func encode(into writer: inout AgentFieldWriter) {
        for list in [sources, lostBuses] {
            writer.u8(UInt8(clamping: list.count))
            for item in list.prefix(255) { writer.string(AgentResponse.bounded(item)) }
        }
    }

    static func decode(from reader: inout AgentFieldReader) throws(AgentProtocolViolation) -> AgentSessionFollowing {
        var lists: [[String]] = []
        for _ in 0..<2 {
            let count = Int(try reader.u8())
            var list: [String] = []
            for _ in 0..<count { list.append(try reader.string()) }
            lists.append(list)
        }
        return AgentSessionFollowing(sources: lists[0], lostBuses: lists[1])
    }
}

/// What a watching client receives: a notification of the device, or a change of the login
/// session the agent follows.
public enum AgentWatchEvent: Sendable, Hashable {
    /// A notification of the agent's device.
    case device(AgentEvent)
    /// A change of the login session.
    case session(AgentSessionEvent)

    /// When the agent posted it.
    public var date: Date {
        switch self {
        case .device(let event): event.date
        case .session(let event): event.date
        }
    }

    /// Its name: the notification's, or the session change's (`sessionLocked`, …).
    public var name: String {
        switch self {
        case .device(let event): event.notification.rawValue
        case .session(let event): event.change.rawValue
        }
    }
}
