import Foundation
import SystemPackage
import TPMBridge

/// The device directory's `tpm` file: the device key object's blobs (sealed by the TPM) and
/// the NV indexes of the effaceable key and the anti-rollback counter (0: none). Its
/// presence records that the device key is in a TPM (`Keys/key-hierarchy.md` §4.4):
///
/// `"DPTM" || 0x02 || u32 effaceable index || u32 counter index || u16 n || public (n) || u16 m || private (m)`,
/// integers big-endian. Nothing in it is secret without the TPM that made it. Version 1 was
/// written with templates that had `noDA` objects and indexes; it is refused by name
/// (`integrityFailure`), since its objects cannot be used under the version-2 storage root key.
struct TPMDeviceRecord: Sendable, Equatable {
    static let magic = Data("DPTM".utf8)
    static let version: UInt8 = 2

    var deviceKey: TPMKeyBlobs
    var effaceableIndex: UInt32
    var counterIndex: UInt32

    func encoded() -> Data {
        var data = Self.magic + Data([Self.version])
        data.appendBigEndian(effaceableIndex)
        data.appendBigEndian(counterIndex)
        data.appendPrefixed(deviceKey.publicArea)
        data.appendPrefixed(deviceKey.privateArea)
        return data
    }

    static func decode(_ data: Data) throws(DataProtectionError) -> TPMDeviceRecord {
        var reader = TPMFieldReader(Data(data))
        let header = reader.take(5)
        if header == magic + Data([1]) {
            throw .integrity(
                "The device directory's tpm file is version 1: it was made with TPM templates that had noDA objects and NV indexes, which this version no longer uses (every TPM object is dictionary-attack protected now).",
                hint: "Copy the data out with the version that made the device, then erase it and create it again (dpctl init --device-key tpm).")
        }
        guard header == magic + Data([version]),
              let effaceable = reader.uint32(), let counter = reader.uint32(),
              let publicArea = reader.prefixed(), let privateArea = reader.prefixed(), reader.isAtEnd else {
            throw .integrity("The device directory's tpm file is corrupt.",
                             hint: "Restore the device directory from a backup, or erase the device (all data is lost).")
        }
        return TPMDeviceRecord(deviceKey: TPMKeyBlobs(publicArea: publicArea, privateArea: privateArea),
                               effaceableIndex: effaceable, counterIndex: counter)
    }
}

extension Data {
    mutating func appendBigEndian(_ value: UInt32) {
        append(contentsOf: [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)])
    }

    /// `u16 length || bytes`.
    mutating func appendPrefixed(_ bytes: Data) {
        precondition(bytes.count <= 0xFFFF)
        append(contentsOf: [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)])
        append(bytes)
    }
}

/// Reads the TPM files' fields front to back; `nil` past the end.
struct TPMFieldReader {
    private let data: Data
    private var offset = 0

    init(_ data: Data) { self.data = Data(data) }

    var isAtEnd: Bool { offset == data.count }

    mutating func take(_ count: Int) -> Data? {
        guard count >= 0, offset + count <= data.count else { return nil }
        defer { offset += count }
        return data.subdata(in: offset..<offset + count)
    }

    mutating func uint8() -> UInt8? { take(1).map { $0[$0.startIndex] } }

    mutating func uint16() -> UInt16? { take(2).map { $0.reduce(0) { $0 << 8 | UInt16($1) } } }

    mutating func uint32() -> UInt32? { take(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } } }

    mutating func uint64() -> UInt64? { take(8).map { $0.reduce(0) { $0 << 8 | UInt64($1) } } }

    mutating func prefixed() -> Data? {
        guard let count = uint16() else { return nil }
        return take(Int(count))
    }
}
