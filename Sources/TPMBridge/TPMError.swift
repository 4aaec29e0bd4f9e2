import CTSS

/// Failures of the TPM bridge, sorted by what the caller does about them.
package enum TPMError: Error, Equatable, Sendable {
    /// The TCTI could not be loaded or the TPM did not answer (`detail` says which).
    case unreachable(String)
    /// The TPM is in dictionary-attack lockout; one failure is forgiven every
    /// `recoverySeconds` seconds (`TPM2_PT_LOCKOUT_RECOVERY`).
    case lockout(recoverySeconds: UInt32)
    /// A wrong authorisation value (`TPM_RC_AUTH_FAIL` / `TPM_RC_BAD_AUTH`): counted by the TPM.
    case authorizationFailed
    /// A blob that this TPM did not make, or that was altered (`TPM_RC_INTEGRITY`, …).
    case foreignObject(String)
    /// The NV index exists already (`TPM_RC_NV_DEFINED`).
    case indexDefined
    /// The NV index does not exist (`TPM_RC_HANDLE` on it) or was never written (`TPM_RC_NV_UNINITIALIZED`).
    case indexMissing
    /// Any other response code, with tpm2-tss's decoding of it.
    case failed(code: UInt32, message: String)

    /// A handle the TPM does not know (an object or session flushed behind this context's back:
    /// `TPM_RC_REFERENCE_H0`-`H6`, `TPM_RC_REFERENCE_S0`-`S6`).
    var isVanishedHandle: Bool {
        switch self {
        case .indexMissing: true
        case .failed(let code, _): (0x910...0x91E).contains(code & 0xFFFF)
        default: false
        }
    }

    /// What the response code `rc` means; `nil` for success.
    static func from(_ rc: TSS2_RC) -> TPMError? {
        guard rc != 0 else { return nil }
        let layer = rc & 0x00FF_0000
        let decoded = Tss2_RC_Decode(rc).map { String(cString: $0) } ?? "0x\(String(rc, radix: 16))"
        // The TCTI's own layer, and ESAPI's I/O and connection failures: nothing reached the TPM.
        let tctiLayer: UInt32 = 10 << 16
        if layer == tctiLayer { return .unreachable(decoded) }
        if layer == (7 << 16) || layer == (8 << 16) {
            let base = rc & 0xFFFF
            // TSS2_BASE_RC_IO_ERROR 9, NO_CONNECTION 15, TRY_AGAIN 11 (timeout), NOT_IMPLEMENTED / BAD_CONTEXT from a missing TCTI.
            if [9, 15, 11].contains(base) { return .unreachable(decoded) }
            return .failed(code: rc, message: decoded)
        }
        guard layer == 0 else { return .failed(code: rc, message: decoded) }
        let code = rc & 0xFFFF
        if code == 0x921 { return .lockout(recoverySeconds: 0) }
        if code & 0x080 != 0 {
            // Format 1: the error number is in bits 0-5, the rest says which parameter, handle or session.
            switch code & 0x03F {
            case 0x00E, 0x022: return .authorizationFailed        // TPM_RC_AUTH_FAIL, TPM_RC_BAD_AUTH
            case 0x01F, 0x018: return .foreignObject(decoded)     // TPM_RC_INTEGRITY, TPM_RC_KEY_SIZE
            case 0x00B: return .indexMissing                      // TPM_RC_HANDLE
            default: return .failed(code: rc, message: decoded)
            }
        }
        switch code {
        case 0x14C: return .indexDefined                          // TPM_RC_NV_DEFINED
        case 0x14A: return .indexMissing                          // TPM_RC_NV_UNINITIALIZED
        case 0x98E: return .authorizationFailed
        default: return .failed(code: rc, message: decoded)
        }
    }
}

extension TPMError: CustomStringConvertible {
    package var description: String {
        switch self {
        case .unreachable(let detail): "the TPM cannot be reached (\(detail))"
        case .lockout(let seconds): "the TPM is in dictionary-attack lockout (one failure forgiven every \(seconds) s)"
        case .authorizationFailed: "the TPM refused the authorisation value"
        case .foreignObject(let detail): "the TPM refused an object it did not make (\(detail))"
        case .indexDefined: "the NV index is defined already"
        case .indexMissing: "the NV index is not defined"
        case .failed(_, let message): "the TPM failed: \(message)"
        }
    }
}
