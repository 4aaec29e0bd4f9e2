import CTSS
import Foundation
import SodiumBridge

extension TPMContext {
    /// Defines an NV index in the owner hierarchy: `size` bytes, or (`counter`) a monotonic
    /// 8-byte counter; read and written with the owner's authorisation (a permanent handle:
    /// exempt from lockout), not `TPMA_NV_NO_DA`.
    package func defineIndex(_ index: UInt32, size: Int, counter: Bool) throws(TPMError) {
        try withContext { esys throws(TPMError) in
            var template = TPM2B_NV_PUBLIC()
            dp_tpm_nv_template(&template, index, UInt16(size), counter ? 1 : 0)
            var auth = TPM2B_AUTH()
            var handle = ESYS_TR(ESYS_TR_NONE)
            try check(Esys_NV_DefineSpace(esys, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                                          ESYS_TR(ESYS_TR_NONE), &auth, &template, &handle), in: esys)
            indexes[index] = handle
        }
    }

    /// Removes the NV index (nothing to do if it is not defined).
    package func undefineIndex(_ index: UInt32) throws(TPMError) {
        try withContext { esys throws(TPMError) in
            let handle: ESYS_TR
            do throws(TPMError) {
                handle = try resource(for: index, in: esys)
            } catch .indexMissing {
                return
            }
            try check(Esys_NV_UndefineSpace(esys, ESYS_TR(ESYS_TR_RH_OWNER), handle, ESYS_TR(ESYS_TR_PASSWORD),
                                            ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE)), in: esys)
            indexes[index] = nil
        }
    }

    /// Writes `bytes` at `offset` of the NV index, in place.
    package func writeIndex(_ index: UInt32, _ bytes: SecureBytes, at offset: Int) throws(TPMError) {
        try withContext { esys throws(TPMError) in
            let handle = try resource(for: index, in: esys)
            var buffer = TPM2B_MAX_NV_BUFFER()
            defer { withUnsafeMutableBytes(of: &buffer) { dp_tpm_wipe($0.baseAddress, $0.count) } }
            buffer.size = withUnsafeMutableBytes(of: &buffer.buffer) { bytes.copy(into: $0) }
            try check(Esys_NV_Write(esys, ESYS_TR(ESYS_TR_RH_OWNER), handle, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                                    ESYS_TR(ESYS_TR_NONE), &buffer, UInt16(offset)), in: esys)
        }
    }

    /// Reads `count` bytes at `offset` of the NV index into secure memory.
    package func readIndex(_ index: UInt32, count: Int, at offset: Int = 0) throws(TPMError) -> SecureBytes {
        try withContext { esys throws(TPMError) -> SecureBytes in
            let handle = try resource(for: index, in: esys)
            var data: UnsafeMutablePointer<TPM2B_MAX_NV_BUFFER>?
            defer {
                if let data { dp_tpm_wipe(data, MemoryLayout<TPM2B_MAX_NV_BUFFER>.size) }
                Esys_Free(data)
            }
            try check(Esys_NV_Read(esys, ESYS_TR(ESYS_TR_RH_OWNER), handle, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                                   ESYS_TR(ESYS_TR_NONE), UInt16(count), UInt16(offset), &data), in: esys)
            guard let data, Int(data.pointee.size) == count else { throw .failed(code: 0, message: "TPM2_NV_Read returned a short answer") }
            return withUnsafeBytes(of: data.pointee.buffer) { source in
                SecureBytes(count: count) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source.prefix(count))) }
            }
        }
    }

    /// Advances the NV counter by one.
    package func incrementCounter(_ index: UInt32) throws(TPMError) {
        try withContext { esys throws(TPMError) in
            let handle = try resource(for: index, in: esys)
            try check(Esys_NV_Increment(esys, ESYS_TR(ESYS_TR_RH_OWNER), handle, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                                        ESYS_TR(ESYS_TR_NONE)), in: esys)
        }
    }

    /// The NV counter's value (big-endian in the TPM).
    package func readCounter(_ index: UInt32) throws(TPMError) -> UInt64 {
        let bytes = try readIndex(index, count: 8)
        defer { bytes.wipe() }
        return bytes.withUnsafeBytes { $0.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
    }

    /// The attributes (`TPMA_NV`) of the NV index as the TPM reports them (`TPM2_NV_ReadPublic`).
    package func indexAttributes(_ index: UInt32) throws(TPMError) -> UInt32 {
        try withContext { esys throws(TPMError) -> UInt32 in
            let handle = try resource(for: index, in: esys)
            var outPublic: UnsafeMutablePointer<TPM2B_NV_PUBLIC>?
            defer { Esys_Free(outPublic) }
            try check(Esys_NV_ReadPublic(esys, handle, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                         &outPublic, nil), in: esys)
            guard let outPublic else { throw .failed(code: 0, message: "TPM2_NV_ReadPublic returned no public area") }
            return outPublic.pointee.nvPublic.attributes
        }
    }

    private func resource(for index: UInt32, in esys: OpaquePointer) throws(TPMError) -> ESYS_TR {
        if let handle = indexes[index] { return handle }
        var handle = ESYS_TR(ESYS_TR_NONE)
        try check(Esys_TR_FromTPMPublic(esys, index, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                        &handle), in: esys)
        indexes[index] = handle
        return handle
    }
}
