/// What holds a device's key: chosen when the device is created (``DeviceConfiguration/deviceKeyKind``)
/// and recorded in its device directory, so that every later opening uses the same.
public enum DeviceKeyKind: String, Sendable, Hashable, CaseIterable {
    /// A random key in the device directory's `uid` file (the default).
    case file
    /// An HMAC key inside a TPM 2.0 that never leaves it, with the passcode bound into a
    /// TPM authorisation (`Keys/key-hierarchy.md` §4.4). The TPM is reached through
    /// ``DeviceConfiguration/tpmTCTI``.
    case tpm
}
