import Foundation

/// A Data Protection class: which key protects a file, and so when it can be used.
///
/// Case names are Foundation's `FileProtectionType` names; the letters are
/// Apple's (A, B, C, CX, D).
public enum ProtectionClass: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// Class A: available only while the device is unlocked (and during the grace period).
    case complete
    /// Class B: new files can be created and written while locked; existing files open only while unlocked.
    case completeUnlessOpen
    /// Class C, the default: available from the first unlock until reboot.
    case completeUntilFirstUserAuthentication
    /// Class CX: like C until the device has stayed locked for the inactivity period, then like A.
    case completeWhenUserInactive
    /// Class D: always available; protected by the device key only.
    case none

    /// The class of new files when nothing else is said.
    public static let `default`: ProtectionClass = .completeUntilFirstUserAuthentication

    /// The Foundation name.
    public var description: String { rawValue }

    /// Whether the class key depends on the passcode (every class but ``none``).
    public var requiresPasscodeKey: Bool { self != .none }

    /// The class for a Foundation protection type; `nil` for a type this library does not know.
    public init?(_ type: FileProtectionType) {
        switch type.rawValue {
        case "NSFileProtectionComplete": self = .complete
        case "NSFileProtectionCompleteUnlessOpen": self = .completeUnlessOpen
        case "NSFileProtectionCompleteUntilFirstUserAuthentication": self = .completeUntilFirstUserAuthentication
        case "NSFileProtectionCompleteWhenUserInactive": self = .completeWhenUserInactive
        case "NSFileProtectionNone": self = .none
        default: return nil
        }
    }

    /// The Foundation protection type (Linux Foundation lacks a constant for
    /// `completeWhenUserInactive`; its raw value is Apple's).
    public var fileProtectionType: FileProtectionType {
        switch self {
        case .complete: .complete
        case .completeUnlessOpen: .completeUnlessOpen
        case .completeUntilFirstUserAuthentication: .completeUntilFirstUserAuthentication
        case .completeWhenUserInactive: FileProtectionType(rawValue: "NSFileProtectionCompleteWhenUserInactive")
        case .none: .none
        }
    }
}
