import DataProtection
import Foundation

/// One frame from the agent (`Keys/agent-protocol.md`, "Responses"): a status byte, then
/// the fields the request's reply holds.
package enum AgentResponse: Sendable, Hashable {
    /// Status 0: done; the fields are the reply to the request.
    case ok([UInt8])
    /// Status 1: the request failed with a semantics error.
    case failure(DataProtectionError)
    /// Status 2: `readFile` of a file too large to come back in a frame (its size):
    /// ask again with a descriptor to write it to.
    case descriptorNeeded(size: UInt64)
    /// Status 3: a notification, on a connection that asked to `watch`.
    case event(AgentEvent)
    /// Status 4: the login session locked, unlocked, or its bus went away, on a connection
    /// that asked to `watch` (of an agent that follows the session).
    case sessionEvent(AgentSessionEvent)

    package func encoded() -> [UInt8] {
        var writer = AgentFieldWriter()
        switch self {
        case .ok(let body):
            writer.u8(0)
            return writer.bytes + body
        case .failure(let error):
            writer.u8(1)
            writer.string(error.code.rawValue)
            writer.string(Self.bounded(error.message))
            writer.optional(error.hint) { $0.string(Self.bounded($1)) }
            writer.milliseconds(error.retryAfter)
            writer.optional(error.sqliteCode) { $0.u32(UInt32(bitPattern: $1)) }
        case .descriptorNeeded(let size):
            writer.u8(2)
            writer.u64(size)
        case .event(let event):
            writer.u8(3)
            writer.u8(UInt8(AgentWireFormat.notifications.firstIndex(of: event.notification)!))
            writer.i64(event.nanosecondsSince1970)
        case .sessionEvent(let event):
            writer.u8(4)
            writer.u8(UInt8(AgentWireFormat.sessionChanges.firstIndex(of: event.change)!))
            writer.string(Self.bounded(event.source))
            writer.i64(event.nanosecondsSince1970)
        }
        return writer.bytes
    }

    /// `text`, cut at a character boundary to fit a string field.
    static func bounded(_ text: String) -> String {
        guard text.utf8.count > AgentWireFormat.maximumStringLength else { return text }
        var result = ""
        for character in text {
            guard result.utf8.count + character.utf8.count <= AgentWireFormat.maximumStringLength else { break }
            result.append(character)
        }
        return result
    }

    package static func decode(_ payload: [UInt8]) throws(AgentProtocolViolation) -> AgentResponse {
        var reader = AgentFieldReader(payload)
        switch try reader.u8() {
        case 0:
            return .ok(Array(payload.dropFirst()))
        case 1:
            let rawCode = try reader.string()
            guard let code = DataProtectionError.Code(rawValue: rawCode) else {
                throw AgentProtocolViolation("unknown error code \(rawCode)")
            }
            let message = try reader.string()
            let hint = try reader.optional { reader throws(AgentProtocolViolation) in try reader.string() }
            let retryAfter = try reader.milliseconds()
            let sqliteCode = try reader.optional { reader throws(AgentProtocolViolation) in Int32(bitPattern: try reader.u32()) }
            try reader.finish()
            return .failure(DataProtectionError(code, message, hint: hint, retryAfter: retryAfter, sqliteCode: sqliteCode))
        case 2:
            let size = try reader.u64()
            try reader.finish()
            return .descriptorNeeded(size: size)
        case 3:
            let notification = try reader.element(of: AgentWireFormat.notifications, "notification")
            let nanoseconds = try reader.i64()
            try reader.finish()
            return .event(AgentEvent(notification: notification, nanosecondsSince1970: nanoseconds))
        case 4:
            let change = try reader.element(of: AgentWireFormat.sessionChanges, "session change")
            let source = try reader.string()
            let nanoseconds = try reader.i64()
            try reader.finish()
            return .sessionEvent(AgentSessionEvent(change: change, source: source, nanosecondsSince1970: nanoseconds))
        case let status:
            throw AgentProtocolViolation("response status \(status)")
        }
    }
}

/// A notification as a watching client receives it.
public struct AgentEvent: Sendable, Hashable {
    /// What the device posted.
    public var notification: DeviceNotification
    /// When the agent posted it, in nanoseconds since 1970 (as the wire carries it).
    public var nanosecondsSince1970: Int64
    /// When the agent posted it.
    public var date: Date { Date(timeIntervalSince1970: Double(nanosecondsSince1970) / 1e9) }

    /// An event as the wire carries it.
    public init(notification: DeviceNotification, nanosecondsSince1970: Int64) {
        self.notification = notification
        self.nanosecondsSince1970 = nanosecondsSince1970
    }

    /// An event posted at `date`.
    public init(notification: DeviceNotification, date: Date) {
        self.init(notification: notification, nanosecondsSince1970: Int64(exactly: (date.timeIntervalSince1970 * 1e9).rounded()) ?? 0)
    }
}

/// The agent's device as `status` reports it.
public struct AgentStatus: Sendable, Hashable {
    /// The lock state.
    public var state: DeviceState
    /// Whether a passcode is set.
    public var passcodeSet: Bool
    /// Consecutive failed passcode attempts.
    public var failedPasscodeAttempts: Int
    /// How long until the next passcode attempt is allowed (`nil`: now).
    public var nextAttemptAllowedIn: Duration?
    /// The agent's auto-lock period (`nil`: never).
    public var autoLock: Duration?
    /// How long until auto-lock, while unlocked (`nil`: not counting).
    public var autoLockIn: Duration?
    /// How long until the next class key is discarded, while locked inside the grace
    /// or inactivity period (`nil`: no discard pending).
    public var keyDiscardIn: Duration?
    /// The classes whose existing files can be opened now.
    public var availableClasses: [ProtectionClass]
    /// The agent's process identifier.
    public var agentProcessIdentifier: Int32
    /// What of the login session the agent follows (empty: nothing; `nil`: an agent that
    /// does not say).
    public var sessionFollowing: AgentSessionFollowing?
    /// What holds the device key (`nil`: a provider of the agent program's own, or an
    /// agent that predates the field).
    public var deviceKeyKind: DeviceKeyKind?

    /// A status with every field given.
    public init(state: DeviceState, passcodeSet: Bool, failedPasscodeAttempts: Int, nextAttemptAllowedIn: Duration?,
                autoLock: Duration?, autoLockIn: Duration?, keyDiscardIn: Duration?, availableClasses: [ProtectionClass],
                agentProcessIdentifier: Int32, sessionFollowing: AgentSessionFollowing? = nil, deviceKeyKind: DeviceKeyKind? = nil) {
        self.state = state
        self.passcodeSet = passcodeSet
        self.failedPasscodeAttempts = failedPasscodeAttempts
        self.nextAttemptAllowedIn = nextAttemptAllowedIn
        self.autoLock = autoLock
        self.autoLockIn = autoLockIn
        self.keyDiscardIn = keyDiscardIn
        self.availableClasses = availableClasses
        self.agentProcessIdentifier = agentProcessIdentifier
        self.sessionFollowing = sessionFollowing
        self.deviceKeyKind = deviceKeyKind
    }
}

// MARK: - Reply bodies

extension AgentStatus {
    func encoded() -> [UInt8] {
        var writer = AgentFieldWriter()
        writer.u8(UInt8(AgentWireFormat.states.firstIndex(of: state)!))
        writer.bool(passcodeSet)
        writer.u32(UInt32(clamping: failedPasscodeAttempts))
        writer.milliseconds(nextAttemptAllowedIn)
        writer.milliseconds(autoLock)
        writer.milliseconds(autoLockIn)
        writer.milliseconds(keyDiscardIn)
        var mask: UInt8 = 0
        for (index, protectionClass) in AgentWireFormat.classes.enumerated() where availableClasses.contains(protectionClass) {
            mask |= 1 << index
        }
        writer.u8(mask)
        writer.u32(UInt32(bitPattern: agentProcessIdentifier))
        // Appended (§6), in this order: what holds the device key (0: not said), then the
        // session followed; absent from agents of before, both sent by agents of now.
        guard deviceKeyKind != nil || sessionFollowing != nil else { return writer.bytes }
        writer.u8(deviceKeyKind.map { AgentWireFormat.deviceKeyKinds.firstIndex(of: $0)! + 1 }.map(UInt8.init) ?? 0)
        sessionFollowing?.encode(into: &writer)
        return writer.bytes
    }

    static func decode(_ body: [UInt8]) throws(AgentProtocolViolation) -> AgentStatus {
        var reader = AgentFieldReader(body)
        let state = try reader.element(of: AgentWireFormat.states, "device state")
        let passcodeSet = try reader.bool()
        let failures = Int(try reader.u32())
        let next = try reader.milliseconds()
        let autoLock = try reader.milliseconds()
        let autoLockIn = try reader.milliseconds()
        let discard = try reader.milliseconds()
        let mask = try reader.u8()
        let pid = Int32(bitPattern: try reader.u32())
        // Appended later, each read only when bytes remain (an agent of before says nothing).
        let keyKind = reader.isAtEnd ? 0 : Int(try reader.u8())
        guard keyKind <= AgentWireFormat.deviceKeyKinds.count else { throw AgentProtocolViolation("device key kind \(keyKind)") }
        let following = reader.isAtEnd ? nil : try AgentSessionFollowing.decode(from: &reader)
        try reader.finish()
        let classes = AgentWireFormat.classes.enumerated().filter { mask & (1 << $0.offset) != 0 }.map(\.element)
        return AgentStatus(state: state, passcodeSet: passcodeSet, failedPasscodeAttempts: failures, nextAttemptAllowedIn: next,
                           autoLock: autoLock, autoLockIn: autoLockIn, keyDiscardIn: discard, availableClasses: classes,
                           agentProcessIdentifier: pid, sessionFollowing: following,
                           deviceKeyKind: keyKind == 0 ? nil : AgentWireFormat.deviceKeyKinds[keyKind - 1])
    }
}

extension ProtectedItemAttributes {
    func encoded() -> [UInt8] {
        var writer = AgentFieldWriter()
        writer.u8(type == .file ? 0 : 1)
        writer.u64(size)
        writer.protectionClass(protectionClass)
        for date in [creationDate, modificationDate] {
            writer.optional(date) { $0.i64(Int64(($1.timeIntervalSince1970 * 1e9).rounded())) }
        }
        return writer.bytes
    }

    static func decode(_ body: [UInt8]) throws(AgentProtocolViolation) -> ProtectedItemAttributes {
        var reader = AgentFieldReader(body)
        let type: ItemType = try reader.element(of: [.file, .directory], "item type")
        let size = try reader.u64()
        let protectionClass = try reader.protectionClass()
        let created = try reader.optional { reader throws(AgentProtocolViolation) in try reader.i64() }
        let modified = try reader.optional { reader throws(AgentProtocolViolation) in try reader.i64() }
        try reader.finish()
        func date(_ nanoseconds: Int64?) -> Date? { nanoseconds.map { Date(timeIntervalSince1970: Double($0) / 1e9) } }
        return ProtectedItemAttributes(type: type, size: size, protectionClass: protectionClass,
                                       creationDate: date(created), modificationDate: date(modified))
    }
}

/// Small reply bodies: nothing, one number, bytes, names.
enum AgentReply {
    static func empty(_ body: [UInt8]) throws(AgentProtocolViolation) {
        try AgentFieldReader(body).finish()
    }

    static func u32(_ value: UInt32) -> [UInt8] {
        var writer = AgentFieldWriter()
        writer.u32(value)
        return writer.bytes
    }

    static func u32(_ body: [UInt8]) throws(AgentProtocolViolation) -> UInt32 {
        var reader = AgentFieldReader(body)
        let value = try reader.u32()
        try reader.finish()
        return value
    }

    static func u64(_ value: UInt64) -> [UInt8] {
        var writer = AgentFieldWriter()
        writer.u64(value)
        return writer.bytes
    }

    static func u64(_ body: [UInt8]) throws(AgentProtocolViolation) -> UInt64 {
        var reader = AgentFieldReader(body)
        let value = try reader.u64()
        try reader.finish()
        return value
    }

    static func data(_ value: Data) -> [UInt8] {
        var writer = AgentFieldWriter()
        writer.data(value)
        return writer.bytes
    }

    static func data(_ body: [UInt8]) throws(AgentProtocolViolation) -> Data {
        var reader = AgentFieldReader(body)
        let value = Data(try reader.data())
        try reader.finish()
        return value
    }

    static func names(_ value: [String]) -> [UInt8] {
        var writer = AgentFieldWriter()
        writer.u32(UInt32(value.count))
        for name in value { writer.string(name) }
        return writer.bytes
    }

    static func names(_ body: [UInt8]) throws(AgentProtocolViolation) -> [String] {
        var reader = AgentFieldReader(body)
        let count = Int(try reader.u32())
        guard count <= body.count / 4 else { throw AgentProtocolViolation("\(count) names in \(body.count) bytes") }
        var names: [String] = []
        names.reserveCapacity(count)
        for _ in 0..<count { names.append(try reader.string()) }
        try reader.finish()
        return names
    }
}
