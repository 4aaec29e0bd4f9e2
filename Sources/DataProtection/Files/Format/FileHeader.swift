import Foundation
import SodiumBridge

/// The header of a protected file, stored twice (slots 0 and 1, 512 bytes each)
/// at the start of the file; the valid slot with the highest generation is current.
///
/// Two slots make every header update atomic: an update writes the slot *not*
/// holding the current header, so a torn write leaves the other one intact.
/// Byte layout: `Keys/file-format.md`, "Header".
package struct FileHeader: Sendable, Hashable {
    static let magic = Data("DPFH".utf8)
    /// The label that starts a chunk's associated data.
    private static let chunkLabel = Data("DPFC".utf8)
    static let version: UInt8 = 1
    /// The stride of the slots: slot `i` starts at `i * 512`.
    package static let slotByteCount = 512
    /// The bytes of a slot area that are the slot (header writes cover these only); the
    /// last 32 bytes of each area are a place record (``FilePlaceRecords``).
    package static let slotFieldsByteCount = 480
    static let slotCount = 2
    /// Where chunk records start.
    package static let regionByteCount = slotByteCount * slotCount
    /// Bytes covered by the MAC (everything before it).
    static let authenticatedByteCount = 160
    static let fileIDByteCount = 16

    package var protectionClass: ProtectionClass
    /// log2 of the chunk size.
    var chunkShift: UInt8
    package var fileID: Data
    /// Increases with every header write.
    package var generation: UInt64
    /// The plaintext length: authenticated, so truncation and extension are detected.
    package var length: UInt64
    /// How many chunk records may physically exist (a write in progress allocates before it commits).
    var allocatedRecords: UInt64
    /// Creation time, nanoseconds since the Unix epoch.
    var creationTime: Int64
    /// Class B: the per-file ephemeral X25519 public key; zeros otherwise.
    var ephemeralPublicKey: Data
    var wrapNonce: Data
    /// The per-file key, wrapped (`ciphertext || tag`, 48 bytes).
    var wrappedKey: Data

    var chunkSize: Int { 1 << Int(chunkShift) }

    /// The on-disk class number (the keybag's slot numbers).
    static func classByte(_ protectionClass: ProtectionClass) -> UInt8 { KeybagSlot(protectionClass).rawValue }

    static func protectionClass(_ byte: UInt8) -> ProtectionClass? {
        KeybagSlot(rawValue: byte)?.protectionClass
    }

    /// `"DPFH" || version || class || chunk shift || 0x00 || file id || ephemeral public key`:
    /// what the file-key wrap binds (class and identity).
    var wrapAssociatedData: Data {
        Self.magic + Data([Self.version, Self.classByte(protectionClass), chunkShift, 0]) + fileID + ephemeralPublicKey
    }

    /// The bytes a slot's MAC covers: every field, in order.
    var authenticatedBytes: Data {
        ByteWriter.data(byteCount: Self.authenticatedByteCount) { writer in
            writer.append(Self.magic)
            writer.append(Self.version)
            writer.append(Self.classByte(protectionClass))
            writer.append(chunkShift)
            writer.append(UInt8(0))
            writer.append(fileID)
            writer.append(generation)
            writer.append(length)
            writer.append(allocatedRecords)
            writer.append(creationTime)
            writer.append(ephemeralPublicKey)
            writer.append(wrapNonce)
            writer.append(wrappedKey)
        }
    }

    /// The 480-byte slot: fields, MAC under the file's header key, zero padding (the
    /// slot area's place record, its last 32 bytes, is not part of it).
    package func encodedSlot(macKey: SecureBytes) -> Data {
        let fields = authenticatedBytes
        let mac = BLAKE2b.mac(key: macKey, [.data(fields)])
        return fields + mac + Data(count: Self.slotFieldsByteCount - fields.count - mac.count)
    }

    /// A parsed slot whose MAC is not yet checked (checking needs the file key).
    package struct UnverifiedSlot: Sendable {
        package let header: FileHeader
        let authenticated: Data
        let mac: Data

        func verify(macKey: SecureBytes) -> Bool {
            ConstantTime.equals(BLAKE2b.mac(key: macKey, [.data(authenticated)]), mac)
        }
    }

    /// Parses a slot's structure; `nil` when it is not a well-formed header (torn or never written).
    package static func parse(slot: Data) -> UnverifiedSlot? {
        guard slot.count == slotByteCount else { return nil }
        var reader = ByteReader(slot, what: "file header")
        do {
            try reader.expect(ascii: "DPFH")
            guard try reader.uint8() == version,
                  let protectionClass = protectionClass(try reader.uint8()) else { return nil }
            let chunkShift = try reader.uint8()
            guard (12...20).contains(chunkShift), try reader.uint8() == 0 else { return nil }
            let header = FileHeader(
                protectionClass: protectionClass, chunkShift: chunkShift,
                fileID: try reader.bytes(fileIDByteCount),
                generation: try reader.uint64(), length: try reader.uint64(), allocatedRecords: try reader.uint64(),
                creationTime: try reader.int64(),
                ephemeralPublicKey: try reader.bytes(32), wrapNonce: try reader.bytes(24), wrappedKey: try reader.bytes(48))
            let mac = try reader.bytes(32)
            guard header.allocatedRecords <= header.maximumRecords,
                  header.records(forLength: header.length) <= header.allocatedRecords else { return nil }
            return UnverifiedSlot(header: header, authenticated: Data(slot.prefix(authenticatedByteCount)), mac: mac)
        } catch {
            return nil
        }
    }

    // MARK: - Chunk geometry

    /// Chunk records needed for `length` plaintext bytes.
    package func records(forLength length: UInt64) -> UInt64 {
        // No `length + chunkSize - 1`: a forged length near 2^64 must not trap.
        (length >> UInt64(chunkShift)) + (length & UInt64(chunkSize - 1) == 0 ? 0 : 1)
    }

    /// The most bytes a writer puts in a file (`Keys/file-format.md` §8): 2^48, 256 TiB.
    package static let maximumLength: UInt64 = 1 << 48

    /// The most records a file can have: its physical size must fit an `Int64`.
    var maximumRecords: UInt64 {
        UInt64((Int64.max - Int64(Self.regionByteCount)) / Int64(recordStride))
    }

    /// Bytes one full record takes.
    package var recordStride: Int { chunkSize + ChunkRecords.overhead }

    /// Where record `index` starts.
    package func recordOffset(_ index: UInt64) -> Int64 {
        Int64(Self.regionByteCount) + Int64(index) * Int64(recordStride)
    }

    /// Plaintext bytes in chunk `index` of a file of `length` bytes.
    package func chunkLength(_ index: UInt64, length: UInt64) -> Int {
        let start = index << UInt64(chunkShift)
        return Int(min(UInt64(chunkSize), length - start))
    }

    /// The physical size of a file whose content is `length` bytes.
    func physicalSize(forLength length: UInt64) -> Int64 {
        let count = records(forLength: length)
        guard count > 0 else { return Int64(Self.regionByteCount) }
        return recordOffset(count - 1) + Int64(chunkLength(count - 1, length: length) + ChunkRecords.overhead)
    }

    /// The associated data of chunk `index`: `"DPFC" || file id || index (u64 LE)`.
    /// Gathered on the stack and copied into the `Data` returned once, not through ``ByteWriter``
    /// (whose `Data` with its own deallocator cost 450 more instructions per point select and
    /// 1.9k per WAL commit: every read and write of a record needs one).
    package func chunkAssociatedData(_ index: UInt64) -> Data {
        let label = Self.chunkLabel, id = fileID  // not `self`: the closure would copy the whole header
        return withUnsafeTemporaryAllocation(byteCount: label.count + id.count + 8, alignment: 8) { out in
            label.withUnsafeBytes { out.copyMemory(from: $0) }
            id.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[label.count...]).copyMemory(from: $0) }
            out.storeBytes(of: index.littleEndian, toByteOffset: label.count + id.count, as: UInt64.self)
            return Data(bytes: out.baseAddress!, count: out.count)
        }
    }
}
