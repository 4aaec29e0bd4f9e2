import Foundation
import SodiumBridge
import SystemPackage

/// The `dpdir` file in every store directory: the directory's random id (which
/// its entries' encrypted names are bound to), its default class and two tags
/// binding it to its place (its parent's id and its name, ``Place``), MACed
/// with a key derived from the metadata key (`Keys/file-format.md` §11.2).
///
/// `"DPDR" || 0x02 || id(16) || class (0: none given) || place 0 (32) || place 1 (32) || MAC(32)`.
/// Both places are the same at rest; a move writes the new place beside the old one
/// before the rename and alone after it. Version 1 (no places, 54 bytes) is read only
/// to migrate a store made before places (``ProtectedStore`` binds it at open).
package struct DirectoryMetadata: Sendable, Hashable {
    static let fileName = "dpdir"
    static let label = "DataProtection v1 directory"
    static let version: UInt8 = 2
    static let byteCount = 4 + 1 + 16 + 1 + 2 * Place.tagByteCount + 32
    static let unplacedByteCount = 4 + 1 + 16 + 1 + 32

    var id: Data
    /// The class new entries take when none is given. `nil` only for the root until its class
    /// is set, and for a directory an earlier writer made under parents recording none; new
    /// entries there take `completeUntilFirstUserAuthentication`. A directory made now records
    /// its parent's class of the moment when none is given (``ProtectedStore/makeDirectories(_:protection:)``).
    var protectionClass: ProtectionClass?
    /// The place tags (two; none for a version-1 `dpdir`).
    var places: [Data]

    /// A new directory's metadata, bound to `place`.
    init(id: Data, protectionClass: ProtectionClass?, place: Place, device: Device) throws(DataProtectionError) {
        self.id = id
        self.protectionClass = protectionClass
        let tag = try place.tag(of: .directory, id: id, device: device)
        places = [tag, tag]
    }

    private init(id: Data, protectionClass: ProtectionClass?, places: [Data]) {
        self.id = id
        self.protectionClass = protectionClass
        self.places = places
    }

    /// Whether this directory is bound to `place` (by either tag).
    func isBound(to place: Place, device: Device) throws(DataProtectionError) -> Bool {
        try place.isBound(.directory, id: id, tags: places, device: device)
    }

    /// The same directory bound to `first` and `second` (a move: the old place and the new).
    func placed(_ first: Place, _ second: Place, device: Device) throws(DataProtectionError) -> DirectoryMetadata {
        DirectoryMetadata(id: id, protectionClass: protectionClass,
                          places: [try first.tag(of: .directory, id: id, device: device),
                                   try second.tag(of: .directory, id: id, device: device)])
    }

    func encoded(device: Device) throws(DataProtectionError) -> Data {
        precondition(places.count == 2, "a directory's metadata is written with its places")
        let body = ByteWriter.data(byteCount: Self.byteCount - 32) { writer in  // then its 32-byte MAC
            writer.append(Data("DPDR".utf8))
            writer.append(Self.version)
            writer.append(id)
            writer.append(protectionClass.map { FileHeader.classByte($0) } ?? 0)
            writer.append(places[0])
            writer.append(places[1])
        }
        return body + (try Self.mac(body, device: device))
    }

    /// Decodes and authenticates a `dpdir` (version 2, or version 1 with no places).
    package static func decode(_ data: Data, device: Device) throws(DataProtectionError) -> DirectoryMetadata {
        guard data.count == byteCount || data.count == unplacedByteCount else {
            throw .integrity("A directory's metadata is \(data.count) bytes long; it must be \(byteCount).")
        }
        let body = Data(data.prefix(data.count - 32))
        guard ConstantTime.equals(try mac(body, device: device), Data(data.suffix(32))) else {
            throw .integrity("A directory's metadata does not authenticate: it was tampered with or belongs to another device.")
        }
        var reader = ByteReader(body, what: "directory metadata")
        try reader.expect(ascii: "DPDR")
        let version = try reader.uint8()
        guard version == (data.count == byteCount ? 2 : 1) else { throw .integrity("A directory's metadata has an unknown version.") }
        let id = try reader.bytes(16)
        let classByte = try reader.uint8()
        guard classByte == 0 || FileHeader.protectionClass(classByte) != nil else {
            throw .integrity("A directory's metadata names an unknown class.")
        }
        let places = version == 2 ? [try reader.bytes(Place.tagByteCount), try reader.bytes(Place.tagByteCount)] : []
        return DirectoryMetadata(id: id, protectionClass: classByte == 0 ? nil : FileHeader.protectionClass(classByte), places: places)
    }

    static func mac(_ body: Data, device: Device) throws(DataProtectionError) -> Data {
        try device.withMetadataKeys(derivedFor: [label]) { keys throws(DataProtectionError) -> Data in
            BLAKE2b.mac(key: keys[0], [.data(body)])
        }
    }
}
