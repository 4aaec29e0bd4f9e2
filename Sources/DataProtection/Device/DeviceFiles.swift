import Foundation
import SodiumBridge
import SystemPackage

/// The files of a device directory and their encodings.
///
/// | file | content |
/// |---|---|
/// | `uid` | the device key (``FileDeviceKey``) |
/// | `effaceable` | `"DPEF" || 0x01 || 32 key bytes`: the key the keybag seal depends on |
/// | `keybag` | the sealed ``Keybag`` |
/// | `attempts` | the ``AttemptRecord`` |
/// | `lock` | the owner's pid, under `flock` while it owns the device (``OwnershipLock``) |
///
/// Creation order makes `effaceable` the commit point: it is written last when
/// a device is created and removed first when it is erased, so a present
/// effaceable key always has a complete keybag beside it.
struct DeviceFiles: Sendable {
    static let effaceableMagic = Data("DPEF".utf8)
    static let effaceableVersion: UInt8 = 1

    let directory: FilePath
    let fileSystem: any FileSystem
    var writer: AtomicFileWriter { AtomicFileWriter(fileSystem: fileSystem) }

    var uid: FilePath { directory.appending("uid") }
    var effaceable: FilePath { directory.appending("effaceable") }
    var keybag: FilePath { directory.appending("keybag") }
    var attempts: FilePath { directory.appending("attempts") }

    /// Removes what interrupted writes left in the directory (its owner only).
    func removeDebris() throws(DataProtectionError) {
        try writer.removeDebris(in: directory)
    }

    func readEffaceableKey() throws(DataProtectionError) -> SecureBytes? {
        guard let contents = try fileSystem.readSecretFile(at: effaceable) else { return nil }
        guard contents.count == 37, contents.hasPrefix(Self.effaceableMagic + Data([Self.effaceableVersion])) else {
            throw .integrity("The effaceable key file is corrupt.",
                             hint: "Erase the device to start afresh (all data is lost).")
        }
        return SecureBytes(copying: contents, offset: 5, count: 32)
    }

    func writeEffaceableKey(_ key: SecureBytes) throws(DataProtectionError) {
        try writer.write([.data(Self.effaceableMagic + Data([Self.effaceableVersion])), .secret(key)], to: effaceable)
    }

    /// Destroys the effaceable key: every keybag sealed with it becomes unreadable.
    func destroyEffaceableKey() throws(DataProtectionError) {
        try fileSystem.removeFile(at: effaceable)
        try fileSystem.synchronizeDirectory(at: directory)
    }

    func exists(_ path: FilePath) throws(DataProtectionError) -> Bool {
        try fileSystem.readFile(at: path) != nil
    }

    func readKeybag(sealKey: SecureBytes) throws(DataProtectionError) -> Keybag {
        guard let file = try fileSystem.readFile(at: keybag) else {
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
        guard let file = try fileSystem.readFile(at: attempts) else { return nil }
        return try? AttemptRecord.decode(file, macKey: macKey)
    }

    func writeAttempts(_ record: AttemptRecord, macKey: SecureBytes, durable: Bool = true) throws(DataProtectionError) {
        try writer.write([.data(record.encoded(macKey: macKey))], to: attempts, durable: durable)
    }
}
