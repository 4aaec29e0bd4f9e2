import Foundation
import SodiumBridge
import SystemPackage

/// Which device a data directory belongs to (`Keys/file-format.md`, "The store's identity").
///
/// A data directory holds `.dpstore` (`"DPST" || 0x01 || 16-byte id`, public) and its
/// device directory holds `store-id` with the same bytes. The id lets a tool find the
/// device directory kept apart from the data (`dpctl`: `$XDG_STATE_HOME/dpctl/<id>`),
/// and pairing them refuses, with `integrityFailure`, a data directory opened with
/// another device's secrets or with a device directory made afresh (the data moved
/// to another machine without its device directory). Neither file is secret.
enum StoreIdentity {
    static let fileName = ".dpstore"
    static let deviceFileName = "store-id"
    static let magic = Data("DPST".utf8)
    static let version: UInt8 = 1
    static let idByteCount = 16

    static func encode(_ id: Data) -> Data { magic + Data([version]) + id }

    /// The id in a `.dpstore` or `store-id` file; `nil` if there is no file.
    static func read(_ path: FilePath, fileSystem: any FileSystem) throws(DataProtectionError) -> Data? {
        guard let contents = try fileSystem.readFile(at: path) else { return nil }
        guard contents.count == 5 + idByteCount, contents.prefix(4) == magic, contents[contents.startIndex + 4] == version else {
            throw .integrity("\(path) is not a store identity file (DPST, version 1, 21 bytes).")
        }
        return contents.suffix(idByteCount)
    }

    /// The id as dpctl names directories: 32 lowercase hex digits.
    static func hex(_ id: Data) -> String { id.map { String(format: "%02x", $0) }.joined() }

    /// Pairs the data directory `root` with `device` before the store uses either: refuses
    /// another device's data, or data whose device directory was made afresh; records the
    /// id on whichever side lacks it (a new store, or a store from before identities).
    static func pair(root: FilePath, device: Device) throws(DataProtectionError) {
        let fileSystem = device.fileSystem
        let writer = AtomicFileWriter(fileSystem: fileSystem)
        let dataPath = root.appending(fileName)
        let devicePath = FilePath(device.directory.path).appending(deviceFileName)
        let dataID = try read(dataPath, fileSystem: fileSystem)
        let deviceID = try read(devicePath, fileSystem: fileSystem)
        let hasData = try fileSystem.readFile(at: root.appending(DirectoryMetadata.fileName)) != nil
        if let dataID, let deviceID, dataID != deviceID {
            throw .integrity("The data directory \(root) belongs to another device (store \(hex(dataID)); this device's is \(hex(deviceID))).",
                             hint: "Open it with its own device directory (dpctl: --device <dir>).")
        }
        if hasData && device.wasCreated && deviceID == nil {
            throw .integrity("The data directory \(root) holds a store, but its device directory \(device.directory.path) was just made afresh: the data cannot be opened without the device directory it was made with.",
                             hint: "Use the device directory the store was made with (copy it from the machine the data comes from, or pass --device <dir>).")
        }
        let id = dataID ?? deviceID ?? Random.bytes(count: idByteCount)
        if deviceID == nil { try writer.write([.data(encode(id))], to: devicePath) }
        if dataID == nil { try writer.write([.data(encode(id))], to: dataPath) }
    }
}

extension ProtectedStore {
    /// The identifier of the store in the data directory `directory` (32 hex digits), or
    /// `nil` if it has none (no store, or one made before identifiers). Tools use it to
    /// find the store's device directory when it is kept apart from the data.
    public static func identifier(ofDataDirectory directory: URL) throws(DataProtectionError) -> String? {
        try StoreIdentity.read(FilePath(directory.path).appending(StoreIdentity.fileName), fileSystem: PosixFileSystem())
            .map(StoreIdentity.hex)
    }

    /// Creates the data directory `directory` (mode 0700) with a new store identifier, and
    /// returns the identifier; `fileExists` if it already holds a store identity.
    public static func createDataDirectory(at directory: URL) throws(DataProtectionError) -> String {
        let fileSystem = PosixFileSystem()
        let root = FilePath(directory.path)
        try fileSystem.createDirectory(at: root)
        let path = root.appending(StoreIdentity.fileName)
        if try StoreIdentity.read(path, fileSystem: fileSystem) != nil {
            throw DataProtectionError(.fileExists, "\(directory.path) already holds a store.")
        }
        let id = Random.bytes(count: StoreIdentity.idByteCount)
        try AtomicFileWriter(fileSystem: fileSystem).write([.data(StoreIdentity.encode(id))], to: path)
        return StoreIdentity.hex(id)
    }
}
