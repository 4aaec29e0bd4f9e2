import Foundation
import SodiumBridge
import SystemPackage

/// Which device a data directory belongs to (`Keys/file-format.md`, "The store's identity").
///
/// A data directory holds `.dpstore` (`"DPST" || layout version || 16-byte id`, public) and its
/// device directory holds `store-id` with the same bytes. The id lets a tool find the
/// device directory kept apart from the data (`dpctl`: `$XDG_STATE_HOME/dpctl/<id>`),
/// and pairing them refuses, with `integrityFailure`, a data directory opened with
/// another device's secrets or with a device directory made afresh (the data moved
/// to another machine without its device directory). Neither file is secret.
enum StoreIdentity {
    static let fileName = ".dpstore"
    static let deviceFileName = "store-id"
    static let magic = Data("DPST".utf8)
    /// The layout version: 2 binds every entry to its place (`Keys/file-format.md` §10.2);
    /// a store at version 1 (or with no identity at all) is migrated when opened.
    static let version: UInt8 = 2
    static let idByteCount = 16

    static func encode(_ id: Data) -> Data { magic + Data([version]) + id }

    /// The id and layout version in a `.dpstore` or `store-id` file; `nil` if there is no file.
    static func read(_ path: FilePath, fileSystem: any FileSystem) throws(DataProtectionError) -> (id: Data, version: UInt8)? {
        guard let contents = try fileSystem.readFile(at: path, limit: smallFileByteLimit) else { return nil }
        let fileVersion = contents.count > 4 ? contents[contents.startIndex + 4] : 0
        guard contents.count == 5 + idByteCount, contents.prefix(4) == magic, (1...version).contains(fileVersion) else {
            if contents.count == 5 + idByteCount, contents.prefix(4) == magic {
                throw .integrity("\(path) is from a newer version of DataProtection (store layout \(fileVersion); this one reads 1 to \(version)).",
                                 hint: "Use a newer DataProtection (or dpctl) with this store.")
            }
            throw .integrity("\(path) is not a store identity file (DPST, 21 bytes).")
        }
        return (contents.suffix(idByteCount), fileVersion)
    }

    /// The id as dpctl names directories: 32 lowercase hex digits.
    static func hex(_ id: Data) -> String { id.map { String(format: "%02x", $0) }.joined() }

    /// What pairing a data directory with its device found.
    struct Pairing {
        let id: Data
        /// The store holds entries written before places (layout 1): they must be bound
        /// before the store is used.
        let needsPlaces: Bool
    }

    /// Pairs the data directory `root` with `device` before the store uses either: refuses
    /// another device's data, or data whose device directory was made afresh. Writes
    /// nothing: ``record(_:root:device:)`` does, once the store is at the current layout.
    static func pair(root: FilePath, device: Device) throws(DataProtectionError) -> Pairing {
        let fileSystem = device.fileSystem
        let data = try read(root.appending(fileName), fileSystem: fileSystem)
        let deviceSide = try read(FilePath(device.directory.path).appending(deviceFileName), fileSystem: fileSystem)
        let hasData = try fileSystem.readFile(at: root.appending(DirectoryMetadata.fileName), limit: smallFileByteLimit) != nil
        if let data, let deviceSide, data.id != deviceSide.id {
            throw .integrity("The data directory \(root) belongs to another device (store \(hex(data.id)); this device's is \(hex(deviceSide.id))).",
                             hint: "Open it with its own device directory (dpctl: --device <dir>).")
        }
        if hasData && device.wasCreated && deviceSide == nil {
            throw .integrity("The data directory \(root) holds a store, but its device directory \(device.directory.path) was just made afresh: the data cannot be opened without the device directory it was made with.",
                             hint: "Use the device directory the store was made with (copy it from the machine the data comes from, or pass --device <dir>).")
        }
        if hasData && data == nil {
            // §11.3 step 3 writes `.dpstore` again from `store-id`: only for data this device's
            // metadata key authenticates, never binding another device's data to this one.
            try requireRootAuthenticates(root: root, device: device)
        }
        // The device directory says which layout the data is at (the data directory's own
        // claim is not trusted: an attacker with the data alone could forge it).
        return Pairing(id: data?.id ?? deviceSide?.id ?? Random.bytes(count: idByteCount),
                       needsPlaces: hasData && (deviceSide?.version ?? 1) < version)
    }

    /// Refuses (`integrityFailure`) a root whose `dpdir` does not authenticate with `device`.
    static func requireRootAuthenticates(root: FilePath, device: Device) throws(DataProtectionError) {
        let fileSystem = device.fileSystem
        guard let metadata = try fileSystem.readFile(at: root.appending(DirectoryMetadata.fileName), limit: smallFileByteLimit),
              (try? DirectoryMetadata.decode(metadata, device: device)) != nil
        else {
            throw .integrity("The data directory \(root) has no \(fileName), and its metadata does not authenticate with the device directory \(device.directory.path): it belongs to another device.",
                             hint: "Open it with its own device directory (dpctl: --device <dir>).")
        }
    }

    /// Whether the data at `root` was written with `device`'s current keys: its root `dpdir`
    /// authenticates. After an erase (new keys) the files from before do not.
    static func rootAuthenticates(root: FilePath, device: Device) -> Bool {
        (try? requireRootAuthenticates(root: root, device: device)) != nil
    }

    /// Records the pairing at the current layout on both sides (the device's first).
    static func record(_ pairing: Pairing, root: FilePath, device: Device) throws(DataProtectionError) {
        let fileSystem = device.fileSystem
        let writer = AtomicFileWriter(fileSystem: fileSystem)
        let encoded = encode(pairing.id)
        for path in [FilePath(device.directory.path).appending(deviceFileName), root.appending(fileName)]
        where try fileSystem.readFile(at: path, limit: smallFileByteLimit) != encoded {
            try writer.write([.data(encoded)], to: path)
        }
    }
}

extension ProtectedStore {
    /// The identifier of the store in the data directory `directory` (32 hex digits), or
    /// `nil` if it has none (no store, or one made before identifiers). Tools use it to
    /// find the store's device directory when it is kept apart from the data.
    public static func identifier(ofDataDirectory directory: URL) throws(DataProtectionError) -> String? {
        try StoreIdentity.read(FilePath(directory.path).appending(StoreIdentity.fileName), fileSystem: PosixFileSystem())
            .map { StoreIdentity.hex($0.id) }
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
