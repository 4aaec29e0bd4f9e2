import Foundation
import SodiumBridge
import SystemPackage
import TPMBridge

/// The device key in a TPM 2.0 (`Keys/key-hierarchy.md` §4.4): an HMAC-SHA-256 key object
/// made inside the TPM under its storage root key, kept in the device directory's `tpm`
/// file only as the TPM-sealed blobs, so it is usable only by that TPM.
///
/// The passcode is bound in the TPM too: each passcode has a second HMAC object whose auth
/// value is derived from the Argon2id output, dictionary-attack protected (no `noDA`), and
/// the passcode key is derived from that object's HMAC. Every guess therefore needs this
/// TPM, and every wrong guess counts in its dictionary-attack counter; in lockout the TPM
/// refuses, and the attempt is `passcodeAttemptsDelayed` with the TPM's recovery time. The
/// passcode objects' blobs are in `tpm-passcode`, one per keybag salt (two while a passcode
/// change is under way).
package final class TPMDeviceKey: DeviceKeyProvider {
    /// Labels of the TPM derivations (normative, like ``KeyHierarchy/Label``).
    enum Label {
        /// `authValue = BLAKE2b-256(key: Argon2id output, label)`: the passcode object's auth value.
        static let passcodeAuth = "DataProtection v1 TPM passcode auth"
        /// The message the passcode object HMACs; its output keys the passcode key.
        static let passcodeFactor = "DataProtection v1 TPM passcode factor"
    }

    static let bindingsMagic = Data("DPTP".utf8)
    static let bindingsVersion: UInt8 = 1

    let context: TPMContext
    let record: TPMDeviceRecord
    let files: DeviceFiles
    private let knownCounter = Locked<UInt64?>(nil)

    /// The TCTI the TPM is reached through.
    package var tcti: String { context.tcti }

    /// The TPM commands sent through this device key so far (`dpctl bench`).
    package var commandCount: Int { context.commandCount }

    private init(context: TPMContext, record: TPMDeviceRecord, files: DeviceFiles) {
        self.context = context
        self.record = record
        self.files = files
    }

    deinit { context.close() }

    /// The device key of the device directory `files` in the TPM at `tcti`; with `create`
    /// and no `tpm` file yet, makes the key object (and records it).
    static func open(files: DeviceFiles, tcti: String, create: Bool) throws(DataProtectionError) -> TPMDeviceKey {
        let context: TPMContext
        do {
            context = try TPMContext(tcti: tcti)
        } catch {
            throw .tpm(error, tcti: tcti)
        }
        if let stored = try files.fileSystem.readFile(at: files.tpm, limit: smallFileByteLimit) {
            return TPMDeviceKey(context: context, record: try TPMDeviceRecord.decode(stored), files: files)
        }
        guard create else {
            throw .integrity("The device directory's tpm file is missing.",
                             hint: "Restore the device directory from a backup, or erase the device (all data is lost).")
        }
        let blobs: TPMKeyBlobs
        let effaceableIndex: UInt32
        let counterIndex: UInt32
        do {
            blobs = try context.createHMACKey(authValue: nil)
            effaceableIndex = try defineFreshIndex(in: context, size: effaceableByteCount)
            counterIndex = try defineFreshIndex(in: context, size: 8, counter: true)
            // A counter is readable once it was incremented.
            try context.incrementCounter(counterIndex)
        } catch {
            throw .tpm(error, tcti: tcti)
        }
        let record = TPMDeviceRecord(deviceKey: blobs, effaceableIndex: effaceableIndex, counterIndex: counterIndex)
        try files.writer.write([.data(record.encoded())], to: files.tpm)
        return TPMDeviceKey(context: context, record: record, files: files)
    }

    /// The NV index of the effaceable key: two 32-byte slots, as the `effaceable` file's.
    static let effaceableByteCount = 32 * DeviceFiles.effaceableSlotCount

    /// Defines an NV index of `size` bytes at a random handle of the owner range
    /// 0x01800000-0x01BFFFFF not in use yet.
    private static func defineFreshIndex(in context: TPMContext, size: Int, counter: Bool = false) throws(TPMError) -> UInt32 {
        var attempts = 0
        while true {
            let index = UInt32.random(in: 0x0180_0000...0x01BF_FFFF)
            do {
                try context.defineIndex(index, size: size, counter: counter)
                return index
            } catch .indexDefined where attempts < 16 {
                attempts += 1
            }
        }
    }

    /// Whether the effaceable key is in the TPM's NV storage (every TPM device made since it was).
    var keepsEffaceableKey: Bool { record.effaceableIndex != 0 }

    /// The effaceable key slots in NV storage; `nil` when the index holds none (never written,
    /// or undefined by an erase).
    func readEffaceable() throws(DataProtectionError) -> SecureBytes? {
        do {
            return try context.readIndex(record.effaceableIndex, count: Self.effaceableByteCount)
        } catch .indexMissing {
            return nil
        } catch {
            throw .tpm(error, tcti: tcti)
        }
    }

    /// Writes `bytes` at `offset` of the effaceable index, in place; an index undefined by an
    /// erase is defined again first (the same handle: the record does not change).
    func writeEffaceable(_ bytes: SecureBytes, at offset: Int) throws(DataProtectionError) {
        do {
            do {
                try context.writeIndex(record.effaceableIndex, bytes, at: offset)
            } catch .indexMissing {
                try context.defineIndex(record.effaceableIndex, size: Self.effaceableByteCount, counter: false)
                try context.writeIndex(record.effaceableIndex, bytes, at: offset)
            }
        } catch {
            throw .tpm(error, tcti: tcti)
        }
    }

    /// Overwrites both slots with zeros and undefines the index: the TPM releases the storage,
    /// and nothing sealed under an effaceable key from before opens again.
    func effaceAll() throws(DataProtectionError) {
        do {
            do {
                try context.writeIndex(record.effaceableIndex, SecureBytes(count: Self.effaceableByteCount), at: 0)
            } catch .indexMissing {
                return
            }
            try context.undefineIndex(record.effaceableIndex)
        } catch {
            throw .tpm(error, tcti: tcti)
        }
    }

    /// Whether the TPM's monotonic counter marks the attempt counter (every TPM device made since it does).
    var keepsCounter: Bool { record.counterIndex != 0 }

    /// The anti-rollback counter's value: read from the TPM once, then followed in memory (only
    /// the device's owner, under its `flock`, advances it).
    func counterValue() throws(DataProtectionError) -> UInt64 {
        if let known = knownCounter.withLock({ $0 }) { return known }
        do {
            let value = try context.readCounter(record.counterIndex)
            knownCounter.withLock { $0 = value }
            return value
        } catch {
            throw .tpm(error, tcti: tcti)
        }
    }

    /// Advances the anti-rollback counter by one.
    func advanceCounter() throws(DataProtectionError) {
        do {
            try context.incrementCounter(record.counterIndex)
            knownCounter.withLock { known in known = known.map { $0 + 1 } }
        } catch {
            knownCounter.withLock { $0 = nil }
            throw .tpm(error, tcti: tcti)
        }
    }

    /// HMAC-SHA-256 of `message` under the device key object, in the TPM.
    package func deriveKey(from message: KeyMaterial) throws(DataProtectionError) -> KeyMaterial {
        do {
            return KeyMaterial(secure: try context.hmac(key: record.deviceKey, authValue: nil, message: message.bytes))
        } catch {
            throw .tpm(error, tcti: tcti)
        }
    }

    // MARK: - The passcode in the TPM

    /// `K_passcode` for the Argon2id output `stretched` of the keybag with `salt`:
    /// `BLAKE2b-256(key: HMAC_P(label_factor), label_passcode || 0x00 || stretched)`, where
    /// `HMAC_P` is the passcode object's, authorised with `BLAKE2b-256(key: stretched, label_auth)`.
    /// With `creating`, the object is made first (a passcode being set) and recorded.
    /// A wrong passcode (the TPM refuses the auth value, and counts it) gives a key that
    /// unwraps nothing: `HMAC_device(label_passcode || 0x00 || stretched)`.
    func passcodeKey(stretched: SecureBytes, salt: Data, creating: Bool) throws(DataProtectionError) -> SecureBytes {
        let auth = Self.authValue(stretched: stretched)
        defer { auth.wipe() }
        var bindings = try readBindings()
        let blobs: TPMKeyBlobs
        if creating {
            // The other passcode objects are reloaded from their blobs if ever needed again: unloaded
            // now, the new one finds room in the TPM (swtpm holds three objects: the SRK, the device
            // key and one passcode object) without the flush-and-retry of a full TPM.
            for binding in bindings { context.unload(binding.blobs) }
            do {
                blobs = try context.createHMACKey(authValue: auth)
            } catch {
                throw .tpm(error, tcti: tcti)
            }
            bindings.removeAll { $0.salt == salt }
            bindings.append((salt, blobs))
            try writeBindings(bindings)
        } else {
            guard let found = bindings.first(where: { $0.salt == salt }) else {
                throw .integrity("The TPM object of the passcode is missing from the device directory (tpm-passcode).",
                                 hint: "Restore the device directory from a backup, or erase the device (all data is lost).")
            }
            blobs = found.blobs
        }
        let factor: SecureBytes
        do {
            factor = try context.hmac(key: blobs, authValue: auth, message: SecureBytes(copyingUTF8: Label.passcodeFactor))
        } catch .authorizationFailed {
            return try deriveKey(label: KeyHierarchy.Label.passcode, input: [.secret(stretched)])
        } catch {
            throw .tpm(error, tcti: tcti)
        }
        defer { factor.wipe() }
        return Self.passcodeKey(factor: factor, stretched: stretched)
    }

    /// `A = BLAKE2b-256(key: S, label_auth)`: the passcode object's auth value (§4.4.2).
    static func authValue(stretched: SecureBytes) -> SecureBytes {
        BLAKE2b.deriveKey(key: stretched, [.label(Label.passcodeAuth)])
    }

    /// `K_passcode = BLAKE2b-256(key: F, label_passcode || 0x00 || S)` (§4.4.2).
    static func passcodeKey(factor: SecureBytes, stretched: SecureBytes) -> SecureBytes {
        BLAKE2b.deriveKey(key: factor, [.label(KeyHierarchy.Label.passcode), .data(Data([0])), .secret(stretched)])
    }

    /// Keeps only the passcode object of the keybag with `salt` (`nil`: no passcode), once
    /// that keybag is written; the others are unloaded and forgotten.
    func retainPasscodeBinding(salt: Data?) throws(DataProtectionError) {
        let bindings = try readBindings()
        let kept = bindings.filter { $0.salt == salt }
        guard kept.count != bindings.count else { return }
        for binding in bindings where binding.salt != salt { context.unload(binding.blobs) }
        try writeBindings(kept)
    }

    private func readBindings() throws(DataProtectionError) -> [(salt: Data, blobs: TPMKeyBlobs)] {
        guard let data = try files.fileSystem.readFile(at: files.tpmPasscode, limit: smallFileByteLimit) else { return [] }
        var reader = TPMFieldReader(data)
        guard reader.take(4) == Self.bindingsMagic, reader.take(1) == Data([Self.bindingsVersion]), let count = reader.uint8() else {
            throw .integrity("The device directory's tpm-passcode file is corrupt.")
        }
        var bindings: [(salt: Data, blobs: TPMKeyBlobs)] = []
        for _ in 0..<count {
            guard let saltCount = reader.uint8(), let salt = reader.take(Int(saltCount)),
                  let publicArea = reader.prefixed(), let privateArea = reader.prefixed() else {
                throw .integrity("The device directory's tpm-passcode file is corrupt.")
            }
            bindings.append((salt, TPMKeyBlobs(publicArea: publicArea, privateArea: privateArea)))
        }
        guard reader.isAtEnd else { throw .integrity("The device directory's tpm-passcode file is corrupt.") }
        return bindings
    }

    private func writeBindings(_ bindings: [(salt: Data, blobs: TPMKeyBlobs)]) throws(DataProtectionError) {
        var data = Self.bindingsMagic + Data([Self.bindingsVersion, UInt8(bindings.count)])
        for binding in bindings {
            data.append(UInt8(binding.salt.count))
            data.append(binding.salt)
            data.appendPrefixed(binding.blobs.publicArea)
            data.appendPrefixed(binding.blobs.privateArea)
        }
        try files.writer.write([.data(data)], to: files.tpmPasscode)
    }
}
