import Foundation
import SodiumBridge

/// Where an entry of the store belongs: the id of the directory that holds it and
/// its name there (`Keys/file-format.md` §10.2). A file's and a directory's
/// metadata carry a tag of their place, so that an entry moved on disk behind the
/// store's back (two names swapped, a file put into another directory) is refused
/// with `integrityFailure` instead of being served under the other name.
///
/// The tag is keyed with a key derived from the metadata key, which every lock
/// state has: `mv` rebinds an entry while the device is locked, as it renames it.
package struct Place: Sendable, Hashable {
    static let label = "DataProtection v2 place"
    /// The parent id of the root, which has no parent (and an empty name).
    static let rootParentID = Data(count: 16)
    static let tagByteCount = 32

    /// The id of the directory holding the entry.
    package let directoryID: Data
    /// The entry's name in that directory (its UTF-8 bytes; empty for the root).
    package let name: String

    package init(directoryID: Data, name: String) {
        self.directoryID = directoryID
        self.name = name
    }

    /// The root's place.
    static let root = Place(directoryID: rootParentID, name: "")

    enum Kind: String {
        case file = "DPPF"
        case directory = "DPPD"
    }

    /// `BLAKE2b-256(key: K_place, kind || id || directory id || name)`: the tag binding the
    /// file or directory `id` to this place.
    func tag(of kind: Kind, id: Data, device: Device) throws(DataProtectionError) -> Data {
        try device.withMetadataKeys(derivedFor: [Self.label]) { keys throws(DataProtectionError) -> Data in
            BLAKE2b.mac(key: keys[0], [.data(Data(kind.rawValue.utf8)), .data(id), .data(directoryID), .data(Data(name.utf8))])
        }
    }

    /// Whether one of `tags` binds `id` here (constant-time comparisons).
    func isBound(_ kind: Kind, id: Data, tags: [Data], device: Device) throws(DataProtectionError) -> Bool {
        let expected = try tag(of: kind, id: id, device: device)
        var found = false
        for tag in tags where ConstantTime.equals(tag, expected) { found = true }
        return found
    }
}
