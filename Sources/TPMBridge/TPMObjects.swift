import CTSS
import Foundation
import SodiumBridge

extension TPMContext {
    /// Makes a new HMAC-SHA-256 key inside the TPM under the storage root key, with
    /// `authValue` (at most 32 bytes): used with it, and wrong values count in the TPM's
    /// dictionary-attack counter. `nil`: no auth value, `userWithAuth` clear and the trivial
    /// policy: used through the policy session, which the TPM serves in lockout. Never `noDA`.
    /// One command when the storage root key and the policy session are there already.
    package func createHMACKey(authValue: SecureBytes?) throws(TPMError) -> TPMKeyBlobs {
        try withContext { esys throws(TPMError) -> TPMKeyBlobs in
            let parent = try storageRootKey(in: esys)
            var template = TPM2B_PUBLIC()
            dp_tpm_hmac_template(&template, authValue == nil ? 0 : 1)
            let session = try policySession(in: esys)
            var sensitive = TPM2B_SENSITIVE_CREATE()
            defer { withUnsafeMutableBytes(of: &sensitive) { dp_tpm_wipe($0.baseAddress, $0.count) } }
            if let authValue {
                sensitive.sensitive.userAuth.size = withUnsafeMutableBytes(of: &sensitive.sensitive.userAuth.buffer) {
                    authValue.copy(into: $0)
                }
            }
            var outside = TPM2B_DATA()
            var pcrs = TPML_PCR_SELECTION()
            var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
            var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
            try withRoomForObjects(in: esys) { () throws(TPMError) in
                try check(Esys_Create(esys, parent, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                      &sensitive, &template, &outside, &pcrs, &outPrivate, &outPublic, nil, nil, nil), in: esys)
            }
            defer {
                Esys_Free(outPrivate)
                Esys_Free(outPublic)
            }
            guard let outPrivate, let outPublic else { throw .failed(code: 0, message: "TPM2_Create returned no object") }
            return TPMKeyBlobs(publicArea: try Self.marshal(outPublic), privateArea: try Self.marshal(outPrivate))
        }
    }

    /// HMAC-SHA-256 of `message` (at most 1024 bytes) under the key `blobs`, authorised with
    /// `authValue` (a password session), or (`nil`) through the policy session. The key is loaded on first use and stays loaded while
    /// `keepLoaded` (one command per later HMAC), else it is flushed at once.
    ///
    /// - Throws: ``TPMError/authorizationFailed`` for a wrong auth value (counted by the
    ///   TPM), ``TPMError/lockout(recoverySeconds:)``, ``TPMError/foreignObject(_:)`` for a
    ///   blob this TPM did not make.
    package func hmac(key blobs: TPMKeyBlobs, authValue: SecureBytes?, message: SecureBytes, keepLoaded: Bool = true)
        throws(TPMError) -> SecureBytes
    {
        do {
            return try hmacOnce(key: blobs, authValue: authValue, message: message, keepLoaded: keepLoaded)
        } catch where error.isVanishedHandle {
            // Another process flushed our objects (a TPM without a resource manager, short of room): load them again.
            forgetLoadedObjects()
            return try hmacOnce(key: blobs, authValue: authValue, message: message, keepLoaded: keepLoaded)
        }
    }

    private func hmacOnce(key blobs: TPMKeyBlobs, authValue: SecureBytes?, message: SecureBytes, keepLoaded: Bool)
        throws(TPMError) -> SecureBytes
    {
        try withContext { esys throws(TPMError) -> SecureBytes in
            let handle = try load(blobs, in: esys)
            defer {
                // ESAPI keeps a copy of the auth value with the object: emptied after every use.
                var empty = TPM2B_AUTH()
                _ = Esys_TR_SetAuth(esys, handle, &empty)
                if !keepLoaded { unload(blobs, in: esys) }
            }
            if let authValue {
                var auth = TPM2B_AUTH()
                defer { withUnsafeMutableBytes(of: &auth) { dp_tpm_wipe($0.baseAddress, $0.count) } }
                auth.size = withUnsafeMutableBytes(of: &auth.buffer) { authValue.copy(into: $0) }
                guard Esys_TR_SetAuth(esys, handle, &auth) == 0 else { throw .failed(code: 0, message: "the auth value was refused by ESAPI") }
            }
            var buffer = TPM2B_MAX_BUFFER()
            defer { withUnsafeMutableBytes(of: &buffer) { dp_tpm_wipe($0.baseAddress, $0.count) } }
            buffer.size = withUnsafeMutableBytes(of: &buffer.buffer) { message.copy(into: $0) }
            var digest: UnsafeMutablePointer<TPM2B_DIGEST>?
            defer {
                if let digest { dp_tpm_wipe(digest, MemoryLayout<TPM2B_DIGEST>.size) }
                Esys_Free(digest)
            }
            let authorization = authValue == nil ? try policySession(in: esys) : ESYS_TR(ESYS_TR_PASSWORD)
            try check(Esys_HMAC(esys, handle, authorization, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                &buffer, TPMI_ALG_HASH(TPM2_ALG_SHA256), &digest), in: esys)
            guard let digest, digest.pointee.size == 32 else { throw .failed(code: 0, message: "TPM2_HMAC returned no 32-byte digest") }
            return withUnsafeBytes(of: digest.pointee.buffer) { source in
                SecureBytes(count: 32) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source.prefix(32))) }
            }
        }
    }

    /// Flushes the key `blobs` if this context loaded it.
    package func unload(_ blobs: TPMKeyBlobs) {
        try? withContext { esys in unload(blobs, in: esys) }
    }

    private func unload(_ blobs: TPMKeyBlobs, in esys: OpaquePointer) {
        guard let handle = loaded.removeValue(forKey: blobs) else { return }
        try? check(Esys_FlushContext(esys, handle), in: esys)
    }

    private func load(_ blobs: TPMKeyBlobs, in esys: OpaquePointer) throws(TPMError) -> ESYS_TR {
        if let handle = loaded[blobs] { return handle }
        let parent = try storageRootKey(in: esys)
        var publicArea = try Self.unmarshal(blobs.publicArea, as: TPM2B_PUBLIC(), Tss2_MU_TPM2B_PUBLIC_Unmarshal)
        var privateArea = try Self.unmarshal(blobs.privateArea, as: TPM2B_PRIVATE(), Tss2_MU_TPM2B_PRIVATE_Unmarshal)
        var handle = ESYS_TR(ESYS_TR_NONE)
        let session = try policySession(in: esys)
        try withRoomForObjects(in: esys) { () throws(TPMError) in
            try check(Esys_Load(esys, parent, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                &privateArea, &publicArea, &handle), in: esys)
        }
        loaded[blobs] = handle
        return handle
    }

    /// The object attributes (`TPMA_OBJECT`) of the key `blobs` as the TPM reports them
    /// (`TPM2_ReadPublic` on the loaded object), and of the storage root key with `blobs` `nil`.
    package func objectAttributes(of blobs: TPMKeyBlobs?) throws(TPMError) -> UInt32 {
        try withContext { esys throws(TPMError) -> UInt32 in
            let handle: ESYS_TR
            if let blobs {
                handle = try load(blobs, in: esys)
            } else {
                handle = try storageRootKey(in: esys)
            }
            var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
            defer { Esys_Free(outPublic) }
            try check(Esys_ReadPublic(esys, handle, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                      &outPublic, nil, nil), in: esys)
            guard let outPublic else { throw .failed(code: 0, message: "TPM2_ReadPublic returned no public area") }
            return outPublic.pointee.publicArea.objectAttributes
        }
    }

    static func marshal(_ value: UnsafeMutablePointer<TPM2B_PUBLIC>) throws(TPMError) -> Data {
        try marshal(value, what: "public", Tss2_MU_TPM2B_PUBLIC_Marshal)
    }

    static func marshal(_ value: UnsafeMutablePointer<TPM2B_PRIVATE>) throws(TPMError) -> Data {
        try marshal(value, what: "private", Tss2_MU_TPM2B_PRIVATE_Marshal)
    }

    private static func marshal<T>(
        _ value: UnsafeMutablePointer<T>, what: String,
        _ function: (UnsafePointer<T>?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?) -> TSS2_RC
    ) throws(TPMError) -> Data {
        var buffer = [UInt8](repeating: 0, count: MemoryLayout<T>.size)
        var offset = 0
        guard function(value, &buffer, buffer.count, &offset) == 0 else {
            throw .failed(code: 0, message: "the \(what) area could not be marshalled")
        }
        return Data(buffer.prefix(offset))
    }

    static func unmarshal<T>(
        _ data: Data, as empty: T,
        _ function: (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<T>?) -> TSS2_RC
    ) throws(TPMError) -> T {
        var value = empty
        var offset = 0
        let bytes = [UInt8](data)
        let rc = function(bytes, bytes.count, &offset, &value)
        guard rc == 0, offset == bytes.count else { throw .foreignObject("a stored TPM object is malformed") }
        return value
    }
}
