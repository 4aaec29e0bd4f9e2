import Foundation
import SodiumBridge
import SystemPackage

/// The `dpdir` file in every store directory: the directory's random id (which
/// its entries' encrypted names are bound to) and its default class, MACed with
/// a key derived from the metadata key.
///
/// `"DPDR" || 0x01 || id(16) || class (0: none given) || MAC(32)`.
package struct DirectoryMetadata: Sendable, Hashable {
    static let fileName = "dpdir"
    static let label = "DataProtection v1 directory"
    static let byteCount = 4 + 1 + 16 + 1 + 32

    var id: Data
    /// The class new entries take when none is given (`nil`: none was given to this directory).
    var protectionClass: ProtectionClass?

    func encoded(device: Device) throws(DataProtectionError) -> Data {
        var writer = ByteWriter(capacity: Self.byteCount)
        writer.append(Data("DPDR".utf8))
        writer.append(UInt8(1))
        writer.append(id)
        writer.append(protectionClass.map { FileHeader.classByte($0) } ?? 0)
        let body = writer.data
        return body + (try Self.mac(body, device: device))
    }

    package static func decode(_ data: Data, device: Device) throws(DataProtectionError) -> DirectoryMetadata {
        guard data.count == byteCount else {
            throw .integrity("A directory's metadata is \(data.count) bytes long; it must be \(byteCount).")
        }
        let body = Data(data.prefix(byteCount - 32))
        guard ConstantTime.equals(try mac(body, device: device), Data(data.suffix(32))) else {
            throw .integrity("A directory's metadata does not authenticate: it was tampered with or belongs to another device.")
        }
        var reader = ByteReader(body, what: "directory metadata")
        try reader.expect(ascii: "DPDR")
        guard try reader.uint8() == 1 else { throw .integrity("A directory's metadata has an unknown version.") }
        let id = try reader.bytes(16)
        let classByte = try reader.uint8()
        guard classByte == 0 || FileHeader.protectionClass(classByte) != nil else {
            throw .integrity("A directory's metadata names an unknown class.")
        }
        return DirectoryMetadata(id: id, protectionClass: classByte == 0 ? nil : FileHeader.protectionClass(classByte))
    }

    private static func mac(_ body: Data, device: Device) throws(DataProtectionError) -> Data {
        try device.withMetadataKeys(derivedFor: [label]) { keys throws(DataProtectionError) -> Data in
            BLAKE2b.mac(key: keys[0], [.data(body)])
        }
    }
}
