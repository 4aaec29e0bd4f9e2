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
        /// Fingerprints a failed passcode (to spot an immediate repeat), keyed by the counter key.
        package static let passcodeFingerprint = "DataProtection v1 passcode fingerprint"
    }

    let deviceKey: any DeviceKeyProvider

    package init(deviceKey: any DeviceKeyProvider) {
        self.deviceKey = deviceKey
    }

    /// `K_seal`: seals the keybag; depends on the effaceable key and the device key.
    package func sealKey(effaceable: SecureBytes) -> SecureBytes {
        deviceKey.deriveKey(label: Label.keybagSeal, input: [.secret(effaceable)])
    }

    /// `K_device`: wraps class D and the metadata key.
    package func deviceOnlyKey() -> SecureBytes {
        deviceKey.deriveKey(label: Label.deviceOnly, input: [])
    }

    /// `K_passcode`: wraps classes A, B (secret), C and CX.
    package func passcodeKey(passcode: SecureBytes, parameters: PasscodeParameters) throws(DataProtectionError) -> SecureBytes {
        switch parameters {
        case .none:
            return deviceKey.deriveKey(label: Label.noPasscode, input: [])
        case .argon2id(let salt, let operations, let memory):
            let stretched: SecureBytes
            do {
                stretched = try Argon2id.deriveKey(passcode: passcode, salt: salt, operations: operations, memory: memory)
            } catch {
                throw DataProtectionError(.ioFailure, "Argon2id could not run with \(memory) bytes of memory: \(error).",
                                          hint: "Free some memory and try again.")
            }
            return deviceKey.deriveKey(label: Label.passcode, input: [.secret(stretched)])
        }
    }

    /// `K_counter`: authenticates the attempt counter file.
    package func attemptCounterKey() -> SecureBytes {
        deviceKey.deriveKey(label: Label.attemptCounter, input: [])
    }

    /// A keyed fingerprint of a failed passcode, stored to recognise an immediate repeat.
    package func passcodeFingerprint(_ passcode: SecureBytes, counterKey: SecureBytes) -> Data {
        BLAKE2b.mac(key: counterKey, [.label(Label.passcodeFingerprint), .data(Data([0])), .secret(passcode)])
    }
}
