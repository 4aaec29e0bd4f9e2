/// The wrapped keys of a keybag, in their on-disk order.
package enum KeybagSlot: UInt8, Sendable, CaseIterable {
    /// Class A key (wrapped with the passcode key).
    case complete = 1
    /// Class B X25519 secret key (wrapped with the passcode key).
    case completeUnlessOpenSecret = 2
    /// Class C key (wrapped with the passcode key).
    case completeUntilFirstUserAuthentication = 3
    /// Class CX key (wrapped with the passcode key).
    case completeWhenUserInactive = 4
    /// Class D key (wrapped with the device-only key).
    case none = 5
    /// The store's metadata (file-name) key (wrapped with the device-only key).
    case metadata = 6

    /// Whether the slot is wrapped with the passcode key (else the device-only key).
    var isPasscodeWrapped: Bool { rawValue <= 4 }

    /// The slot holding a class's (secret) key.
    init(_ protectionClass: ProtectionClass) {
        switch protectionClass {
        case .complete: self = .complete
        case .completeUnlessOpen: self = .completeUnlessOpenSecret
        case .completeUntilFirstUserAuthentication: self = .completeUntilFirstUserAuthentication
        case .completeWhenUserInactive: self = .completeWhenUserInactive
        case .none: self = .none
        }
    }

    /// The class whose key the slot holds; `nil` for the metadata key.
    var protectionClass: ProtectionClass? {
        switch self {
        case .complete: .complete
        case .completeUnlessOpenSecret: .completeUnlessOpen
        case .completeUntilFirstUserAuthentication: .completeUntilFirstUserAuthentication
        case .completeWhenUserInactive: .completeWhenUserInactive
        case .none: ProtectionClass.none
        case .metadata: nil
        }
    }
}
