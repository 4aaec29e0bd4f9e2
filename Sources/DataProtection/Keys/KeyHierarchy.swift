import Foundation
import SodiumBridge

/// Every key derived from the device key, with its label.
///
/// The labels are normative (`Keys/key-hierarchy.md`, "Derived keys"): change
/// one and every existing device becomes unreadable.
package struct KeyHierarchy: Sendable {
    package enum Label {
        /// Seals the keybag together with the effaceable key.
        package static let keybagSeal = "DataProtection v1 keybag seal"
        /// Wraps class keys that do not depend on the passcode (class D, metadata).
        package static let deviceOnly = "DataProtection v1 device-only wrap"
        /// Tangles the Argon2id output with the device key.
        package static let passcode = "DataProtection v1 passcode wrap"
        /// The passcode-class wrapping key while no passcode is set.
        package static let noPasscode = "DataProtection v1 no-passcode wrap"
        /// Authenticates the failed-attempt counter.
        package static let attemptCounter = "DataProtection v1 attempt counter"
        /// Keys the fingerprint of a failed attempt (to spot an immediate repeat).
        package static let passcodeFingerprint = "DataProtection v1 passcode fingerprint"
    }

    let deviceKey: any DeviceKeyProvider

    package init(deviceKey: any DeviceKeyProvider) {
        self.deviceKey = deviceKey
    }

    /// `K_seal`: seals the keybag; depends on the effaceable key and the device key.
    package func sealKey(effaceable: SecureBytes) throws(DataProtectionError) -> SecureBytes {
        try deviceKey.deriveKey(label: Label.keybagSeal, input: [.secret(effaceable)])
    }

    /// `K_device`: wraps class D and the metadata key.
    package func deviceOnlyKey() throws(DataProtectionError) -> SecureBytes {
        try deviceKey.deriveKey(label: Label.deviceOnly, input: [])
    }

    /// `K_passcode`: wraps classes A, B (secret), C and CX. With a TPM device key the passcode
    /// is bound in the TPM (``TPMDeviceKey``); `creating` makes its TPM object (a passcode being set).
    package func passcodeKey(passcode: SecureBytes, parameters: PasscodeParameters, creating: Bool = false)
        throws(DataProtectionError) -> SecureBytes
    {
        switch parameters {
        case .none:
            return try deviceKey.deriveKey(label: Label.noPasscode, input: [])
        case .argon2id(let salt, let operations, let memory):
            let stretched: SecureBytes
            do {
                stretched = try Argon2id.deriveKey(passcode: passcode, salt: salt, operations: operations, memory: memory)
            } catch {
                throw DataProtectionError(.ioFailure, "Argon2id could not run with \(memory) bytes of memory: \(error).",
                                          hint: "Free some memory and try again.")
            }
            if let tpm = deviceKey as? TPMDeviceKey {
                return try tpm.passcodeKey(stretched: stretched, salt: salt, creating: creating)
            }
            return try deviceKey.deriveKey(label: Label.passcode, input: [.secret(stretched)])
        }
    }

    /// Once the keybag of `parameters` is written: forgets the TPM passcode objects of other
    /// keybags (nothing to do without a TPM device key).
    func retainPasscodeBinding(for parameters: PasscodeParameters) throws(DataProtectionError) {
        guard let tpm = deviceKey as? TPMDeviceKey else { return }
        if case .argon2id(let salt, _, _) = parameters {
            try tpm.retainPasscodeBinding(salt: salt)
        } else {
            try tpm.retainPasscodeBinding(salt: nil)
        }
    }

    /// `K_counter`: authenticates the attempt counter file.
    package func attemptCounterKey() throws(DataProtectionError) -> SecureBytes {
        try deviceKey.deriveKey(label: Label.attemptCounter, input: [])
    }

    /// What a failed attempt's fingerprint is computed over.
    package enum FingerprintInput {
        /// The passcode key derived (Argon2id, tangled) from the attempt: guessing
        /// the stored wrong passcode costs as much as guessing the real one.
        case derivedKey(SecureBytes)
        /// The raw passcode, when nothing is derived (a passcode given to a device without one).
        case passcode(SecureBytes)
    }

    /// A keyed fingerprint of a failed attempt, stored to recognise an immediate repeat:
    /// `BLAKE2b-256(key: K_fingerprint, 0x01 || K_passcode)` or `(…, 0x02 || passcode)`.
    package func passcodeFingerprint(_ input: FingerprintInput) throws(DataProtectionError) -> Data {
        let key = try deviceKey.deriveKey(label: Label.passcodeFingerprint, input: [])
        switch input {
        case .derivedKey(let derived): return BLAKE2b.mac(key: key, [.data(Data([1])), .secret(derived)])
        case .passcode(let passcode): return BLAKE2b.mac(key: key, [.data(Data([2])), .secret(passcode)])
        }
    }
}
