import TPMBridge

extension DataProtectionError {
    /// The error of a TPM operation of a device reached through `tcti`.
    static func tpm(_ error: TPMError, tcti: String) -> DataProtectionError {
        switch error {
        case .unreachable(let detail):
            return DataProtectionError(
                .ioFailure, "The device key is in a TPM, and the TPM at \(tcti) cannot be reached: \(detail).",
                hint: "Set DPCTL_TPM_TCTI (or DeviceConfiguration.tpmTCTI) to the TPM the device was created with: "
                    + "device:/dev/tpmrm0 (your user in the tss group), or swtpm:host=127.0.0.1,port=… for a software TPM.")
        case .lockout(let seconds):
            return DataProtectionError(
                .passcodeAttemptsDelayed,
                "The TPM is in dictionary-attack lockout after too many wrong authorisations; it forgives one every \(seconds) s.",
                hint: "Wait \(Duration.seconds(seconds).formattedForHumans), then try again.", retryAfter: .seconds(seconds))
        case .foreignObject, .indexMissing:
            return .integrity(
                "The device's TPM objects do not work in the TPM at \(tcti): the device directory belongs to another TPM (or was altered or erased).",
                hint: "Use the TPM the device was created with (DPCTL_TPM_TCTI); else erase the device to start afresh (all data is lost).")
        case .authorizationFailed:
            return .integrity("The TPM refused an authorisation the device holds: the device directory was altered.")
        case .indexDefined, .failed:
            return DataProtectionError(.ioFailure, "The TPM at \(tcti) failed: \(error).")
        }
    }
}
