import DataProtection
import Foundation

/// The agent protocol's limits and numbers (normative: `Keys/agent-protocol.md`).
public enum AgentWireFormat {
    /// The protocol version a client of this release announces in its hello.
    public static let version: UInt32 = 2
    /// The versions the agent speaks: a connection speaks the one its hello announced
    /// (version 1 lacks `sqlStream`).
    public static let versions: ClosedRange<UInt32> = 1...2
    /// The most payload bytes one frame may carry (1 MiB of data plus room for its fields).
    public static let maximumFrameLength = (1 << 20) + 4096
    /// The most bytes of file data in one frame (a handle's read or write, an inline file).
    public static let maximumInlineData = 1 << 20
    /// The most bytes of a path or other string field.
    public static let maximumStringLength = 4096
    /// The longest duration a field carries, in milliseconds (about 146 years): longer ones are sent as this.
    public static let maximumMilliseconds: UInt64 = 1 << 52
    /// The most handles one client may hold open at once.
    public static let maximumHandlesPerClient = 1024
    /// The most recipients of one `backupCreate` (more are a violation).
    public static let maximumBackupRecipients: UInt32 = 1024
    /// How long an agent-side backup waits for other clients' changes already running to end (then `storeBusy`).
    public static let backupGateWait: Duration = .seconds(10)

    /// The failure of a `readFile` whose output lost its reader (a pipe closed early, as in
    /// `dpctl cat big | head`): see ``AgentStore/isOutputClosed(_:)``.
    static let outputClosed = DataProtectionError(.ioFailure, "The output was closed before the end of the file (broken pipe).")

    /// Protection classes on the wire: 0 is "no class given".
    static let classes: [ProtectionClass] = [
        .complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication, .completeWhenUserInactive, .none,
    ]
    /// Device key kinds on the wire, from 1 (0: none given, a program's own provider).
    static let deviceKeyKinds: [DeviceKeyKind] = [.file, .tpm]
    /// Device states on the wire.
    static let states: [DeviceState] = [.booted, .unlocked, .locked]
    /// Handle modes on the wire.
    static let modes: [ProtectedFileHandle.Mode] = [.read, .write, .update, .append]
    /// Notifications on the wire.
    static let notifications: [DeviceNotification] = [.protectedDataWillBecomeUnavailable, .protectedDataDidBecomeAvailable]
    /// A session event's change, by its `u8` (§5).
    static let sessionChanges: [AgentSessionEvent.Change] = [.locked, .sleeping, .unlocked, .busLost]
}

/// A frame or field that breaks the protocol: the connection that sent it is closed.
public struct AgentProtocolViolation: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong with the frame.
    public let reason: String
    /// A violation, described.
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "agent protocol violation: \(reason)" }
}
