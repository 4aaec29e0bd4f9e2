import Foundation
import SodiumBridge
import SystemPackage

/// The files of a device directory and their encodings.
///
/// | file | content |
/// |---|---|
/// | `uid` | the device key (``FileDeviceKey``) |
/// | `effaceable` | `"DPEF" || 0x02 || slot 0 || slot 1`: two 32-byte effaceable key slots (all zeros: empty); the keybag is sealed under the one that opens it |
/// | `keybag` | the sealed ``Keybag`` |
/// | `attempts` | the ``AttemptRecord`` |
/// | `erasing` | present while an erase is under way (the store's files still to be removed) |
/// | `tpm` | present when the device key is in a TPM: the key object's sealed blobs and NV indexes (``TPMDeviceRecord``) |
/// | `tpm-passcode` | the TPM passcode objects' sealed blobs, one per keybag salt (``TPMDeviceKey``) |
/// | `lock` | the owner's pid, under `flock` while it owns the device (``OwnershipLock``) |
///
/// Creation order makes `effaceable` the commit point: it is written last when
/// a device is created, so a present effaceable key always has a complete keybag
/// beside it. Afterwards it is only ever overwritten **in place** (the same
/// blocks on disk), never replaced by a new file: a key that is rotated out or
/// erased is gone from the disk, not left in freed blocks (`Keys/key-hierarchy.md` §5.3, §8.6).
struct DeviceFiles: Sendable {
    static let effaceableMagic = Data("DPEF".utf8)
    /// Version 1 (one slot, 37 bytes) is still read; every write makes version 2.
    static let effaceableVersion: UInt8 = 2
    static let effaceableSlotCount = 2
    static let effaceableFileByteCount = 5 + 32 * effaceableSlotCount

    let directory: FilePath
    let fileSystem: any FileSystem
    /// The TPM whose NV storage holds the effaceable key instead of the `effaceable` file
    /// (a TPM device key, `Keys/key-hierarchy.md` §4.4); `nil`: the file.
    var effaceableNV: TPMDeviceKey?

    init(directory: FilePath, fileSystem: any FileSystem) {
        self.directory = directory
        self.fileSystem = fileSystem
    }
    var writer: AtomicFileWriter { AtomicFileWriter(fileSystem: fileSystem) }

    var uid: FilePath { directory.appending("uid") }
    var effaceable: FilePath { directory.appending("effaceable") }
    var keybag: FilePath { directory.appending("keybag") }
    var attempts: FilePath { directory.appending("attempts") }
    var erasing: FilePath { directory.appending("erasing") }
    var tpm: FilePath { directory.appending("tpm") }
    var tpmPasscode: FilePath { directory.appending("tpm-passcode") }

    /// Removes what interrupted writes left in the directory (its owner only).
    func removeDebris() throws(DataProtectionError) {
        try writer.removeDebris(in: directory)
    }

    /// The effaceable key slots (`nil`: empty, all zeros, or beyond a torn extension);
    /// `nil` when there is no effaceable file at all.
    func readEffaceableSlots() throws(DataProtectionError) -> [SecureBytes?]? {
        if let effaceableNV {
            guard let contents = try effaceableNV.readEffaceable() else { return nil }
            defer { contents.wipe() }
            let slots = (0..<Self.effaceableSlotCount).map { index -> SecureBytes? in
                let key = SecureBytes(copying: contents, offset: 32 * index, count: 32)
                return key.isZero ? nil : key
            }
            return slots
        }
        guard let contents = try fileSystem.readSecretFile(at: effaceable) else { return nil }
        defer { contents.wipe() }
        let header = contents.withUnsafeBytes { Data($0.prefix(5)) }
        // 37 bytes: version 1, or a version-2 rewrite of one whose extension a power cut lost.
        guard header.count == 5, header.prefix(4) == Self.effaceableMagic, [1, 2].contains(header[4]),
              contents.count == 37 || contents.count == Self.effaceableFileByteCount else {
            throw .integrity("The effaceable key file is corrupt.",
                             hint: "Erase the device to start afresh (all data is lost).")
        }
        let slots = (0..<Self.effaceableSlotCount).map { index -> SecureBytes? in
            let offset = 5 + 32 * index
            guard offset + 32 <= contents.count else { return nil }
            let key = SecureBytes(copying: contents, offset: offset, count: 32)
            if key.isZero { return nil }
            return key
        }
        // Only an erase empties every slot, and it writes the whole file: a short file with
        // no key is damage, never an erased device (which would be created afresh over the keybag).
        guard contents.count == Self.effaceableFileByteCount || slots[0] != nil else {
            throw .integrity("The effaceable key file is truncated.",
                             hint: "Restore the device directory from a backup, or erase the device (all data is lost).")
        }
        return slots
    }

    /// Writes a new effaceable file holding `key` in slot 0 (a device being created).
    func createEffaceableFile(_ key: SecureBytes) throws(DataProtectionError) {
        if let effaceableNV {
            return try effaceableNV.writeEffaceable(SecureBytes(concatenating: [key, SecureBytes(count: 32)]), at: 0)
        }
        try writer.write([.data(Self.effaceableMagic + Data([Self.effaceableVersion])), .secret(key),
                          .data(Data(count: 32))], to: effaceable)
    }

    /// Overwrites slot `index` in place with `key` (`nil`: zeros), and makes it durable.
    /// The header is rewritten too (same bytes, or version 1 → 2).
    func overwriteEffaceableSlot(_ index: Int, with key: SecureBytes?) throws(DataProtectionError) {
        if let effaceableNV {
            return try effaceableNV.writeEffaceable(key ?? SecureBytes(count: 32), at: 32 * index)
        }
        let descriptor = try fileSystem.openDataFile(at: effaceable, create: false)
        do {
            try fileSystem.write([.data(Self.effaceableMagic + Data([Self.effaceableVersion]))], to: descriptor, at: 0, path: effaceable)
            try fileSystem.write([key.map { .secret($0) } ?? .data(Data(count: 32))], to: descriptor,
                                 at: Int64(5 + 32 * index), path: effaceable)
            try fileSystem.synchronize(descriptor, path: effaceable)
        } catch {
            try? fileSystem.close(descriptor, path: effaceable)
            throw error
        }
        try fileSystem.close(descriptor, path: effaceable)
    }

    /// Overwrites every slot with zeros in place, durably: every keybag ever sealed
    /// under this file becomes unreadable. Nothing to do without an effaceable file.
    func effaceAll() throws(DataProtectionError) {
        if let effaceableNV { return try effaceableNV.effaceAll() }
        guard try fileSystem.status(at: effaceable) != nil else { return }
        let descriptor = try fileSystem.openDataFile(at: effaceable, create: false)
        do {
            try fileSystem.write([.data(Self.effaceableMagic + Data([Self.effaceableVersion]) + Data(count: 32 * Self.effaceableSlotCount))],
                                 to: descriptor, at: 0, path: effaceable)
            try fileSystem.synchronize(descriptor, path: effaceable)
        } catch {
            try? fileSystem.close(descriptor, path: effaceable)
            throw error
        }
        try fileSystem.close(descriptor, path: effaceable)
    }

    /// How far an erase has gone (the `erasing` file).
    enum ErasePhase: String, Sendable {
        /// The effaceable key may not be wiped yet: the boot must erase again.
        case effacing
        /// The device is fresh; the store's files from before are still to be removed.
        case removingData
    }

    /// The phase of an erase under way, `nil` if none.
    func readErasing() throws(DataProtectionError) -> ErasePhase? {
        guard let contents = try fileSystem.readFile(at: erasing, limit: smallFileByteLimit) else { return nil }
        let text = String(decoding: contents, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        // Anything unreadable is taken as the earliest phase: erasing again is always safe.
        return ErasePhase(rawValue: text) ?? .effacing
    }

    /// Records the phase of an erase (`nil`: the erase is complete), durably.
    func writeErasing(_ phase: ErasePhase?) throws(DataProtectionError) {
        if let phase {
            try writer.write([.data(Data((phase.rawValue + "\n").utf8))], to: erasing)
        } else if try fileSystem.status(at: erasing) != nil {
            try fileSystem.removeFile(at: erasing)
            try fileSystem.synchronizeDirectory(at: directory)
        }
    }

    /// The first key in the effaceable file (tests and tools; the device itself tries every slot).
    func readEffaceableKey() throws(DataProtectionError) -> SecureBytes? {
        try readEffaceableSlots()?.compactMap { $0 }.first
    }

    func exists(_ path: FilePath) throws(DataProtectionError) -> Bool {
        try fileSystem.readFile(at: path, limit: smallFileByteLimit) != nil
    }

    func readKeybag(sealKey: SecureBytes) throws(DataProtectionError) -> Keybag {
        guard let file = try fileSystem.readFile(at: keybag, limit: smallFileByteLimit) else {
            throw .integrity("The keybag file is missing although the device was set up.",
                             hint: "Restore the device directory from a backup, or erase the device (all data is lost).")
        }
        return try Keybag.open(file: file, sealKey: sealKey)
    }

    func writeKeybag(_ bag: Keybag, sealKey: SecureBytes) throws(DataProtectionError) {
        try writer.write([.data(bag.sealedFile(with: sealKey))], to: keybag)
    }

    /// The stored record, or `nil` when the file is missing or does not authenticate.
    func readAttempts(macKey: SecureBytes) throws(DataProtectionError) -> AttemptRecord? {
        let file: Data?
        do throws(DataProtectionError) {
            file = try fileSystem.readFile(at: attempts, limit: smallFileByteLimit)
        } catch where error.code == .integrityFailure {
            // A FIFO, device or socket planted there is refused as it stands (never replaced behind
            // the user's back); a file far longer than a record is unreadable, like one that does not authenticate.
            if let status = try? fileSystem.status(at: attempts), status.kind != .regular { throw error }
            return nil
        }
        guard let file else { return nil }
        if let tpm = effaceableNV, tpm.keepsCounter {
            return try readCountedAttempts(file, macKey: macKey, tpm: tpm)
        }
        return try? AttemptRecord.decode(file, macKey: macKey)
    }

    /// Writes the attempt record. On a TPM device the file is bound to the TPM's counter
    /// (key-hierarchy.md §4.4.4): with `advance`, to value c+1, written durably before
    /// `TPM2_NV_Increment` (one round trip); without, to the current value c, with no TPM
    /// command: only for the verdict of an attempt whose pending record advanced the counter
    /// (the reset to 0 after a right passcode, the fingerprint after a wrong one, the refund
    /// of an attempt the TPM refused unseen), which the caller guarantees.
    func writeAttempts(_ record: AttemptRecord, macKey: SecureBytes, durable: Bool = true, advance: Bool = true) throws(DataProtectionError) {
        if let tpm = effaceableNV, tpm.keepsCounter {
            // The file for value c+1 first (always durable: a lost rename behind an advanced counter
            // would read as a restored file), then the counter.
            let epoch = try tpm.counterValue() + (advance ? 1 : 0)
            var file = Data()
            file.appendBigEndian(UInt32(truncatingIfNeeded: epoch >> 32))
            file.appendBigEndian(UInt32(truncatingIfNeeded: epoch))
            file.append(record.encoded(macKey: Self.epochKey(macKey, epoch)))
            try writer.write([.data(file)], to: attempts, durable: advance || durable)
            if advance {
                TPMCrashPoint.reach(.attemptsWritten)
                try tpm.advanceCounter()
                TPMCrashPoint.reach(.counterAdvanced)
            }
            return
        }
        try writer.write([.data(record.encoded(macKey: macKey))], to: attempts, durable: durable)
    }

    /// `u64 c || record MACed under BLAKE2b-256(key: K_counter, label || c)`, accepted when `c` is the
    /// TPM counter's value, or one more (a write whose counter increment a crash lost: completed
    /// here). Older is a restored device directory: `integrityFailure`; a MAC that does not verify
    /// is a forged file (`nil`: the longest delay, as without a TPM).
    private func readCountedAttempts(_ file: Data, macKey: SecureBytes, tpm: TPMDeviceKey) throws(DataProtectionError) -> AttemptRecord? {
        var reader = TPMFieldReader(file)
        guard let epoch = reader.uint64(), let body = reader.take(file.count - 8),
              let record = try? AttemptRecord.decode(body, macKey: Self.epochKey(macKey, epoch)) else { return nil }
        let current = try tpm.counterValue()
        if epoch == current { return record }
        if epoch == current + 1 {
            try tpm.advanceCounter()
            return record
        }
        throw .integrity(
            "The passcode attempt counter is older than the TPM's anti-rollback counter (\(epoch) < \(current)): an older device directory was restored.",
            hint: "Restore the current device directory, or erase the device to start afresh (all data is lost).")
    }

    /// The attempt counter's MAC key for counter value `epoch`.
    static func epochKey(_ macKey: SecureBytes, _ epoch: UInt64) -> SecureBytes {
        var value = Data()
        value.appendBigEndian(UInt32(truncatingIfNeeded: epoch >> 32))
        value.appendBigEndian(UInt32(truncatingIfNeeded: epoch))
        return BLAKE2b.deriveKey(key: macKey, [.label("DataProtection v1 attempt counter epoch"), .data(Data([0])), .data(value)])
    }
}
