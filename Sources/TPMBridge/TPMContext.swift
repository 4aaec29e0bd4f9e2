import CTSS
import Foundation
import SodiumBridge

/// One connection to a TPM 2.0 through tpm2-tss's ESAPI, and the transient objects this
/// process loaded into it.
///
/// The TCTI is named in tpm2-tss syntax (`device:/dev/tpmrm0`, `swtpm:host=…,port=…`).
/// The storage root key is recreated on first use (deterministic template, never
/// persisted) and every transient object loaded is flushed when the context closes. The
/// storage root key and the device key are used through one policy session (the trivial
/// policy, no auth value: the TPM serves it in dictionary-attack lockout although neither
/// object is `noDA`), started on first use and kept until the context closes; an
/// object the TPM has no room for (`TPM_RC_OBJECT_MEMORY`: objects of a killed process
/// left on a TPM without a resource manager) makes the context flush the TPM's leftover
/// transient objects and try once more. Calls are serialised: ESAPI is not thread-safe.
package final class TPMContext: @unchecked Sendable {
    /// The TCTI this context was opened with.
    package let tcti: String
    private let lock = NSLock()
    private var tctiContext: OpaquePointer?
    private var esys: OpaquePointer?
    private var storageRoot: ESYS_TR?
    var loaded: [TPMKeyBlobs: ESYS_TR] = [:]
    var indexes: [UInt32: ESYS_TR] = [:]
    private var session: ESYS_TR?
    private var commands = 0

    /// Connects to the TPM behind `tcti`.
    package init(tcti: String) throws(TPMError) {
        self.tcti = tcti
        // tpm2-tss logs every failed command to stderr; a wrong passcode is not an error to print.
        setenv("TSS2_LOG", "all+NONE", 0)
        var tctiContext: OpaquePointer?
        let loaded = Tss2_TctiLdr_Initialize(tcti, &tctiContext)
        guard loaded == 0, let tctiContext else {
            throw .unreachable("the TCTI \"\(tcti)\" could not be opened: \(Tss2_RC_Decode(loaded).map { String(cString: $0) } ?? "")")
        }
        var esys: OpaquePointer?
        let initialized = Esys_Initialize(&esys, tctiContext, nil)
        guard initialized == 0, let esys else {
            var context: OpaquePointer? = tctiContext
            Tss2_TctiLdr_Finalize(&context)
            throw TPMError.from(initialized) ?? .unreachable("ESAPI did not start")
        }
        self.tctiContext = tctiContext
        self.esys = esys
    }

    deinit { close() }

    /// Flushes every transient object this context loaded and disconnects. Idempotent.
    package func close() {
        lock.lock()
        defer { lock.unlock() }
        guard let esys else { return }
        for handle in loaded.values {
            countCommand()
            _ = Esys_FlushContext(esys, handle)
        }
        loaded = [:]
        if let storageRoot {
            countCommand()
            _ = Esys_FlushContext(esys, storageRoot)
        }
        storageRoot = nil
        if let session {
            countCommand()
            _ = Esys_FlushContext(esys, session)
        }
        session = nil
        for var handle in indexes.values { _ = Esys_TR_Close(esys, &handle) }
        indexes = [:]
        var context: OpaquePointer? = esys
        Esys_Finalize(&context)
        self.esys = nil
        var tcti: OpaquePointer? = tctiContext
        Tss2_TctiLdr_Finalize(&tcti)
        tctiContext = nil
    }

    /// The TPM commands this context has sent so far (round trips: `dpctl bench`, and the tests
    /// that hold the commands per unlock, per passcode change and per file read).
    package var commandCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return commands
    }

    /// Forgets (without flushing) the objects this context loaded: the TPM no longer has them.
    func forgetLoadedObjects() {
        lock.lock()
        defer { lock.unlock() }
        guard let esys else { return }
        for var handle in loaded.values { _ = Esys_TR_Close(esys, &handle) }
        loaded = [:]
        if var storageRoot { _ = Esys_TR_Close(esys, &storageRoot) }
        storageRoot = nil
        if var session { _ = Esys_TR_Close(esys, &session) }
        session = nil
    }

    /// Runs `body` with the context, serialised.
    func withContext<R>(_ body: (OpaquePointer) throws(TPMError) -> R) throws(TPMError) -> R {
        lock.lock()
        defer { lock.unlock() }
        guard let esys else { throw .unreachable("the TPM context is closed") }
        return try body(esys)
    }

    /// Checks the response code of one command sent to the TPM; a lockout comes with the TPM's recovery time.
    func check(_ rc: TSS2_RC, in esys: OpaquePointer) throws(TPMError) {
        countCommand()
        guard let error = TPMError.from(rc) else { return }
        if case .lockout = error { throw .lockout(recoverySeconds: lockoutRecovery(in: esys)) }
        throw error
    }

    /// `TPM2_PT_LOCKOUT_INTERVAL`: the seconds after which the TPM forgives one failure (and
    /// so leaves lockout). `TPM2_PT_LOCKOUT_RECOVERY` is the wait after a failed *lockoutAuth*,
    /// which a passcode guess never uses.
    private func lockoutRecovery(in esys: OpaquePointer) -> UInt32 {
        var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
        var more: TPMI_YES_NO = 0
        countCommand()
        // TPM2_PT_VAR + 16 (TPM2_PT_LOCKOUT_INTERVAL).
        let property: UInt32 = 0x200 + 16
        guard Esys_GetCapability(esys, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                 TPM2_CAP(TPM2_CAP_TPM_PROPERTIES), property, 1, &more, &data) == 0 else { return 0 }
        defer { Esys_Free(data) }
        return dp_tpm_property_value(data, property)
    }

    /// The storage root key, created (deterministically) on first use.
    func storageRootKey(in esys: OpaquePointer) throws(TPMError) -> ESYS_TR {
        if let storageRoot { return storageRoot }
        var template = TPM2B_PUBLIC()
        dp_tpm_srk_template(&template)
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var outside = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var handle = ESYS_TR(ESYS_TR_NONE)
        try withRoomForObjects(in: esys) { () throws(TPMError) in
            try check(Esys_CreatePrimary(esys, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                                         ESYS_TR(ESYS_TR_NONE), &sensitive, &template, &outside, &pcrs, &handle,
                                         nil, nil, nil, nil), in: esys)
        }
        storageRoot = handle
        return handle
    }

    /// Runs `load`; when the TPM has no room for another object (`TPM_RC_OBJECT_MEMORY`:
    /// swtpm holds three; objects left by a process killed on a TPM without a resource
    /// manager), flushes the TPM's transient objects that this context did not load and
    /// the keys it keeps loaded (all but the storage root key; they are loaded again when
    /// next used), and runs it once more.
    func withRoomForObjects(in esys: OpaquePointer, _ load: () throws(TPMError) -> Void) throws(TPMError) {
        do {
            try load()
        } catch .failed(let code, _) where code & 0xFFFF == 0x902 {
            flushLeftovers(in: esys)
            for handle in loaded.values {
                countCommand()
                _ = Esys_FlushContext(esys, handle)
            }
            loaded = [:]
            try load()
        }
    }

    private func flushLeftovers(in esys: OpaquePointer) {
        var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
        var more: TPMI_YES_NO = 0
        countCommand()
        guard Esys_GetCapability(esys, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                 TPM2_CAP(TPM2_CAP_HANDLES), 0x8000_0000, 64, &more, &data) == 0 else { return }
        defer { Esys_Free(data) }
        var ours: Set<UInt32> = []
        for handle in Array(loaded.values) + (storageRoot.map { [$0] } ?? []) {
            var tpmHandle: TPM2_HANDLE = 0
            if Esys_TR_GetTpmHandle(esys, handle, &tpmHandle) == 0 { ours.insert(tpmHandle) }
        }
        for index in 0..<dp_tpm_handle_count(data) {
            let tpmHandle = dp_tpm_handle_at(data, index)
            guard !ours.contains(tpmHandle) else { continue }
            countCommand()
            _ = dp_tpm_flush_handle(esys, tpmHandle)
        }
    }

    /// One TPM command sent (a round trip): every `Esys_*` call that reaches the TPM, and
    /// the SAPI flushes of leftovers, count.
    func countCommand() {
        commands += 1
    }

    /// The policy session that authorises the storage root key and the device key: started on
    /// first use (`TPM2_StartAuthSession`: unbound, unsalted, SHA-256, no parameter encryption),
    /// then reused (`continueSession`; a successful use resets its policy digest to zero, which
    /// is what the trivial policy expects). A TPM out of session slots (sessions of a killed
    /// process, on a TPM without a resource manager) has those flushed first.
    func policySession(in esys: OpaquePointer) throws(TPMError) -> ESYS_TR {
        if let session { return session }
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPM2_ALG_ID(TPM2_ALG_NULL)
        var handle = ESYS_TR(ESYS_TR_NONE)
        let start = { () throws(TPMError) in
            try self.check(Esys_StartAuthSession(esys, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                                 ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), nil, TPM2_SE(TPM2_SE_POLICY),
                                                 &symmetric, TPMI_ALG_HASH(TPM2_ALG_SHA256), &handle), in: esys)
        }
        do {
            try start()
        } catch .failed(let code, _) where [0x903, 0x905].contains(code & 0xFFFF) {
            // TPM_RC_SESSION_MEMORY, TPM_RC_SESSION_HANDLES: sessions that no one will use again.
            flushLeftoverSessions(in: esys)
            try start()
        }
        session = handle
        return handle
    }

    private func flushLeftoverSessions(in esys: OpaquePointer) {
        var ours: TPM2_HANDLE = 0
        if let session { _ = Esys_TR_GetTpmHandle(esys, session, &ours) }
        for range: UInt32 in [0x0200_0000, 0x0300_0000] {
            var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
            var more: TPMI_YES_NO = 0
            countCommand()
            guard Esys_GetCapability(esys, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                     TPM2_CAP(TPM2_CAP_HANDLES), range, 64, &more, &data) == 0 else { continue }
            defer { Esys_Free(data) }
            for index in 0..<dp_tpm_handle_count(data) where dp_tpm_handle_at(data, index) != ours {
                countCommand()
                _ = dp_tpm_flush_handle(esys, dp_tpm_handle_at(data, index))
            }
        }
    }
}

extension SecureBytes {
    /// Copies these bytes into a TPM2B buffer (`buffer`, `capacity` bytes); the caller wipes it after use.
    func copy(into buffer: UnsafeMutableRawBufferPointer) -> UInt16 {
        withUnsafeBytes { source in
            precondition(source.count <= buffer.count, "too long for the TPM buffer")
            buffer.copyMemory(from: source)
            return UInt16(source.count)
        }
    }
}
