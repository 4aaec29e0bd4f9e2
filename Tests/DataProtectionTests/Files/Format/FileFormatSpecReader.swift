import Foundation
import SystemPackage
import Testing
@testable import DataProtection
import SodiumBridge

// A reader of protected files and encrypted names written from
// `Keys/file-format.md`, step by step, for the vector and layout tests. It
// decodes every field at the offsets the specification gives and calls the
// implementation's pieces (`FileHeader.parse`, `FileKeys`, `ChunkRecords`)
// where they exist, recording an issue wherever the two disagree.

/// The steps of `file-format.md` §7 at which a file can be refused.
enum FormatSpecStep: String, Sendable, CaseIterable {
    case parse, unwrap, mac, size, chunk
}

/// Labels of `file-format.md` §2, spelled out (not taken from the sources).
enum FormatSpecLabel {
    static let chunks = "DataProtection v1 file chunks"
    static let header = "DataProtection v1 file header"
    static let classB = "DataProtection v1 class B file wrap"
    static let siv = "DataProtection v1 name siv"
    static let name = "DataProtection v1 name"
    static let directory = "DataProtection v1 directory"
    static let place = "DataProtection v2 place"
}

enum FormatSpec {
    static let slotByteCount = 512
    static let regionByteCount = 1024
    static let overhead: UInt64 = 40
    static let classB: UInt8 = 2

    /// LabelKey(key, label): BLAKE2b-256 keyed with `key` over the label alone (no separator).
    static func labelKey(_ key: SecureBytes, _ label: String) -> SecureBytes {
        BLAKE2b.deriveKey(key: key, [.data(Data(label.utf8))])
    }

    static func uint64(_ data: Data, at offset: Int) -> UInt64 {
        let start = data.startIndex + offset
        return data[start..<start + 8].reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    static func littleEndian(_ value: UInt64) -> Data {
        withUnsafeBytes(of: value.littleEndian) { Data($0) }
    }

    /// The class byte of `file-format.md` §4.2.
    static func classByte(_ protectionClass: ProtectionClass) -> UInt8 {
        switch protectionClass {
        case .complete: 1
        case .completeUnlessOpen: 2
        case .completeUntilFirstUserAuthentication: 3
        case .completeWhenUserInactive: 4
        case .none: 5
        }
    }

    static func classByte(named name: String) -> UInt8? {
        switch name {
        case "complete": 1
        case "completeUnlessOpen": 2
        case "completeUntilFirstUserAuthentication": 3
        case "completeWhenUserInactive": 4
        case "none": 5
        default: nil
        }
    }

    static func publicCopy(_ secret: SecureBytes) -> Data {
        secret.copyBytes(in: 0..<secret.count)
    }
}

/// One 512-byte slot decoded at the offsets of `file-format.md` §4.1.
struct FormatSpecSlot: Sendable {
    let bytes: Data
    var magic: Data { bytes.subdata(in: 0..<4) }
    var version: UInt8 { bytes[4] }
    var classByte: UInt8 { bytes[5] }
    var shift: UInt8 { bytes[6] }
    var reserved: UInt8 { bytes[7] }
    var fileID: Data { bytes.subdata(in: 8..<24) }
    var generation: UInt64 { FormatSpec.uint64(bytes, at: 24) }
    var length: UInt64 { FormatSpec.uint64(bytes, at: 32) }
    var allocated: UInt64 { FormatSpec.uint64(bytes, at: 40) }
    var creationTime: Int64 { Int64(bitPattern: FormatSpec.uint64(bytes, at: 48)) }
    var ephemeralPublicKey: Data { bytes.subdata(in: 56..<88) }
    var wrapNonce: Data { bytes.subdata(in: 88..<112) }
    var wrappedKey: Data { bytes.subdata(in: 112..<160) }
    var authenticated: Data { bytes.subdata(in: 0..<160) }
    var mac: Data { bytes.subdata(in: 160..<192) }
    /// Bytes 192-479 (480-511 of the slot area are the place record, §4.1).
    var padding: Data { bytes.subdata(in: 192..<480) }

    init(_ bytes: Data) {
        precondition(bytes.count == FormatSpec.slotByteCount)
        self.bytes = Data(bytes)
    }

    var chunkSize: UInt64 { 1 << UInt64(shift) }
    var stride: UInt64 { chunkSize + FormatSpec.overhead }
    /// `ceil(length / 2^s)` without overflow.
    var recordCount: UInt64 { (length >> UInt64(shift)) + (length & (chunkSize - 1) != 0 ? 1 : 0) }
    var maximumAllocation: UInt64 { (UInt64(Int64.max) - UInt64(FormatSpec.regionByteCount)) / stride }

    /// The structural checks before the MAC, in the order of §7 step 1 (`nil`: a candidate).
    var structuralFault: String? {
        if magic != Data("DPFH".utf8) { return "magic" }
        if version != 1 { return "version" }
        if !(1...5).contains(classByte) { return "class" }
        if !(12...20).contains(shift) { return "chunk shift" }
        if reserved != 0 { return "reserved byte" }
        if allocated > maximumAllocation { return "allocation beyond any addressable file" }
        if recordCount > allocated { return "length needs more records than allocated" }
        return nil
    }

    var isCandidate: Bool { structuralFault == nil }

    /// `"DPFH" || 0x01 || class || s || 0x00 || file id || ephemeral public key`.
    var wrapAssociatedData: Data {
        bytes.subdata(in: 0..<8) + fileID + ephemeralPublicKey
    }

    /// `P(L)`: the size of the file up to the end of its last committed record.
    var committedSize: UInt64 {
        let count = recordCount
        guard count > 0 else { return UInt64(FormatSpec.regionByteCount) }
        return UInt64(FormatSpec.regionByteCount) + (count - 1) * stride + (length - (count - 1) * chunkSize) + FormatSpec.overhead
    }

    /// At rest (as many records allocated as the length needs) the size is exact; while a
    /// growth or shrink is in flight, up to the allocation.
    var allowedSize: UInt64 {
        allocated == recordCount ? committedSize : UInt64(FormatSpec.regionByteCount) + allocated * stride
    }

    func recordOffset(_ index: UInt64) -> UInt64 { UInt64(FormatSpec.regionByteCount) + index * stride }

    func chunkLength(_ index: UInt64) -> UInt64 { min(chunkSize, length - index * chunkSize) }

    /// `"DPFC" || file id || u64(index)`.
    func chunkAssociatedData(_ index: UInt64) -> Data {
        Data("DPFC".utf8) + fileID + FormatSpec.littleEndian(index)
    }
}

/// The keys a reader holds: one per class byte, and the class B pair.
struct FormatSpecKeys {
    var symmetric: [UInt8: SecureBytes]
    var classBSecret: SecureBytes
    var classBPublic: Data

    /// The keys of a vector: `class-key` for every class but B (or random keys), the B pair (or a random one).
    init(vector: FormatVectorFile) throws {
        let classKey = vector.fields["class-key"] != nil ? try vector.hex("class-key") : nil
        symmetric = [:]
        for byte: UInt8 in [1, 3, 4, 5] {
            symmetric[byte] = classKey.map { .formatVector($0) } ?? SecureBytes.random(count: 32)
        }
        if vector.fields["class-b-secret"] != nil {
            classBSecret = .formatVector(try vector.hex("class-b-secret"))
            classBPublic = try vector.hex("class-b-public")
        } else {
            classBSecret = SecureBytes.random(count: 32)
            classBPublic = X25519.publicKey(for: classBSecret)
        }
    }

    /// The keys of an unlocked device (copies; the device keeps its own).
    init(device: Device) throws {
        symmetric = [:]
        for protectionClass in [ProtectionClass.complete, .completeUntilFirstUserAuthentication, .completeWhenUserInactive, .none] {
            let key: SecureBytes? = try device.withClassKey(for: protectionClass) { (key: SecureBytes) -> SecureBytes in
                SecureBytes(copying: key)
            }
            let present: SecureBytes = try #require(key, "the \(protectionClass) key is in memory")
            symmetric[FormatSpec.classByte(protectionClass)] = present
        }
        let secret: SecureBytes? = try device.withClassKey(for: .completeUnlessOpen) { (key: SecureBytes) -> SecureBytes in
            SecureBytes(copying: key)
        }
        classBSecret = try #require(secret, "the class B secret key is in memory")
        classBPublic = device.classBPublicKey
    }
}

/// What opening a file as `file-format.md` §7 says gives.
struct FormatSpecOpening {
    /// The rejected candidates, in the order tried, with the step that rejected each.
    var rejected: [(slot: Int, step: FormatSpecStep)] = []
    /// The current header, if one passed every step before **chunk**.
    var current: (slot: Int, header: FormatSpecSlot)?
    /// The content, when every chunk authenticated.
    var plaintext: Data?
    /// The step that refused the file (`nil`: success).
    var failure: FormatSpecStep?
}

enum FormatSpecReader {
    /// Opens `file` step by step, cross-checking the implementation's parser and key derivations.
    static func open(_ file: Data, keys: FormatSpecKeys) -> FormatSpecOpening {
        var opening = FormatSpecOpening()
        let file = Data(file)
        guard file.count >= FormatSpec.regionByteCount else {
            opening.failure = .parse
            return opening
        }
        var candidates: [(Int, FormatSpecSlot)] = []
        for index in 0..<2 {
            let slot = FormatSpecSlot(file.subdata(in: index * 512..<(index + 1) * 512))
            crossCheckParse(slot)
            if slot.isCandidate { candidates.append((index, slot)) }
        }
        guard !candidates.isEmpty else {
            opening.failure = .parse
            return opening
        }
        candidates.sort { $0.1.generation > $1.1.generation }
        let physical = UInt64(file.count)
        for (index, slot) in candidates {
            guard let fileKey = unwrap(slot, keys: keys) else {
                opening.rejected.append((index, .unwrap))
                continue
            }
            defer { fileKey.wipe() }
            let headerKey = FormatSpec.labelKey(fileKey, FormatSpecLabel.header)
            let chunkKey = FormatSpec.labelKey(fileKey, FormatSpecLabel.chunks)
            crossCheckKeys(fileKey: fileKey, headerKey: headerKey, chunkKey: chunkKey)
            let mac = BLAKE2b.mac(key: headerKey, [.data(slot.authenticated)])
            let authentic = ConstantTime.equals(mac, slot.mac)
            if let parsed = FileHeader.parse(slot: slot.bytes) {
                #expect(parsed.verify(macKey: headerKey) == authentic, "FileHeader.UnverifiedSlot.verify disagrees with the MAC of §4.1")
            }
            guard authentic else {
                opening.rejected.append((index, .mac))
                continue
            }
            guard slot.committedSize <= physical, physical <= slot.allowedSize else {
                opening.rejected.append((index, .size))
                continue
            }
            opening.current = (index, slot)
            var plaintext = Data(count: Int(slot.length))
            for record in 0..<slot.recordCount {
                let start = Int(slot.recordOffset(record))
                let range = start..<start + Int(slot.chunkLength(record) + FormatSpec.overhead)
                guard range.upperBound <= file.count else {
                    opening.failure = .chunk
                    return opening
                }
                do {
                    try ChunkRecords.open(file, range: range, into: &plaintext, at: Int(record * slot.chunkSize),
                                          key: chunkKey, associatedData: slot.chunkAssociatedData(record))
                } catch {
                    opening.failure = .chunk
                    return opening
                }
            }
            opening.plaintext = plaintext
            return opening
        }
        opening.failure = opening.rejected.last?.step
        return opening
    }

    /// §4.3: the file key, or `nil` when the wrap does not open (or X25519 fails).
    static func unwrap(_ slot: FormatSpecSlot, keys: FormatSpecKeys) -> SecureBytes? {
        if slot.classByte == FormatSpec.classB {
            guard let shared = try? X25519.sharedSecret(secretKey: keys.classBSecret, publicKey: slot.ephemeralPublicKey) else {
                return nil
            }
            defer { shared.wipe() }
            let message = Data(FormatSpecLabel.classB.utf8) + [0] + slot.ephemeralPublicKey + keys.classBPublic
            let wrappingKey = BLAKE2b.deriveKey(key: shared, [.data(message)])
            defer { wrappingKey.wipe() }
            return try? XChaCha20Poly1305.openSecret(slot.wrappedKey, using: wrappingKey, nonce: slot.wrapNonce,
                                                     authenticating: slot.wrapAssociatedData)
        }
        guard let key = keys.symmetric[slot.classByte] else { return nil }
        return try? XChaCha20Poly1305.openSecret(slot.wrappedKey, using: key, nonce: slot.wrapNonce,
                                                 authenticating: slot.wrapAssociatedData)
    }

    /// `FileHeader.parse` accepts exactly the candidates of §7 step 1, with the fields of §4.1.
    static func crossCheckParse(_ slot: FormatSpecSlot) {
        // Forged lengths near 2^64 and allocations beyond any addressable file once trapped here
        // (vectors header_length_max, header_allocated_huge): parse must refuse them, not crash.
        let parsed = FileHeader.parse(slot: slot.bytes)
        #expect((parsed != nil) == slot.isCandidate,
                "FileHeader.parse \(parsed == nil ? "refused" : "accepted") a slot whose structural fault is \(slot.structuralFault ?? "none")")
        guard let parsed else { return }
        let header = parsed.header
        #expect(FileHeader.classByte(header.protectionClass) == slot.classByte)
        #expect(header.chunkShift == slot.shift)
        #expect(header.fileID == slot.fileID)
        #expect(header.generation == slot.generation)
        #expect(header.length == slot.length)
        #expect(header.allocatedRecords == slot.allocated)
        #expect(header.creationTime == slot.creationTime)
        #expect(header.ephemeralPublicKey == slot.ephemeralPublicKey)
        #expect(header.wrapNonce == slot.wrapNonce)
        #expect(header.wrappedKey == slot.wrappedKey)
        #expect(parsed.mac == slot.mac)
        #expect(parsed.authenticated == slot.authenticated)
        #expect(header.authenticatedBytes == slot.authenticated, "re-encoding the parsed fields gives back bytes 0..<160")
        #expect(header.wrapAssociatedData == slot.wrapAssociatedData)
        #expect(UInt64(header.chunkSize) == slot.chunkSize)
        #expect(UInt64(header.recordStride) == slot.stride)
        #expect(header.records(forLength: header.length) == slot.recordCount)
        #expect(UInt64(header.physicalSize(forLength: header.length)) == slot.committedSize)
        for index in Set([0, slot.recordCount / 2, max(slot.recordCount, 1) - 1]) {
            #expect(header.chunkAssociatedData(index) == slot.chunkAssociatedData(index))
            #expect(UInt64(header.recordOffset(index)) == slot.recordOffset(index))
        }
    }

    /// `FileKeys` derives `K_header` and `K_chunk` as §3 says.
    static func crossCheckKeys(fileKey: SecureBytes, headerKey: SecureBytes, chunkKey: SecureBytes) {
        let keys = FileKeys(fileKey: SecureBytes(copying: fileKey))
        defer { keys.wipe() }
        #expect(keys.macKey.constantTimeEquals(headerKey), "FileKeys.macKey is LabelKey(F, \"\(FormatSpecLabel.header)\")")
        #expect(keys.chunkKey.constantTimeEquals(chunkKey), "FileKeys.chunkKey is LabelKey(F, \"\(FormatSpecLabel.chunks)\")")
    }
}

// MARK: - Names and dpdir

enum FormatSpecNames {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Unpadded base64url (RFC 4648 §5).
    static func encode(_ data: Data) -> String {
        var out: [UInt8] = []
        let bytes = [UInt8](data)
        var index = 0
        while index < bytes.count {
            let chunk = Array(bytes[index..<min(index + 3, bytes.count)])
            let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * UInt32($1.offset)) }
            for position in 0..<(chunk.count + 1) {
                out.append(alphabet[Int(value >> (18 - 6 * UInt32(position)) & 0x3F)])
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Canonical unpadded base64url only (§10): `nil` for anything else.
    static func decode(_ text: String) -> Data? {
        var bits: UInt32 = 0
        var count = 0
        var out = Data()
        for character in text.utf8 {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            bits = bits << 6 | UInt32(value)
            count += 6
            if count >= 8 {
                count -= 8
                out.append(UInt8(truncatingIfNeeded: bits >> UInt32(count)))
                bits &= (1 << UInt32(count)) - 1
            }
        }
        guard text.utf8.count % 4 != 1 else { return nil }
        return encode(out) == text ? out : nil
    }

    static func syntheticNonce(metadataKey: SecureBytes, directoryID: Data, name: Data) -> Data {
        let siv = FormatSpec.labelKey(metadataKey, FormatSpecLabel.siv)
        defer { siv.wipe() }
        return BLAKE2b.mac(byteCount: 24, key: siv, [.data(directoryID + name)])
    }

    static func encrypt(metadataKey: SecureBytes, directoryID: Data, name: Data) throws -> String {
        let nonce = syntheticNonce(metadataKey: metadataKey, directoryID: directoryID, name: name)
        let key = FormatSpec.labelKey(metadataKey, FormatSpecLabel.name)
        defer { key.wipe() }
        return encode(nonce + (try XChaCha20Poly1305.seal(name, using: key, nonce: nonce, authenticating: Data("DPNM".utf8) + directoryID)))
    }

    /// The name's bytes, or `nil` when the entry does not decrypt (§10).
    static func decrypt(metadataKey: SecureBytes, directoryID: Data, encoded: String) -> Data? {
        guard let data = decode(encoded), data.count >= 40 else { return nil }
        let key = FormatSpec.labelKey(metadataKey, FormatSpecLabel.name)
        defer { key.wipe() }
        let nonce = data.subdata(in: 0..<24)
        guard let name = try? XChaCha20Poly1305.open(data.subdata(in: 24..<data.count), using: key, nonce: nonce,
                                                      authenticating: Data("DPNM".utf8) + directoryID),
              syntheticNonce(metadataKey: metadataKey, directoryID: directoryID, name: name) == nonce,
              String(data: name, encoding: .utf8) != nil
        else { return nil }
        return name
    }

    /// §11.2: the directory id, class byte and places, or `nil` when the `dpdir` is refused
    /// (version 1, 54 bytes, is read with no places).
    static func decodeDirectory(metadataKey: SecureBytes, _ data: Data) -> (id: Data, classByte: UInt8, places: [Data])? {
        let data = Data(data)
        guard data.count == 118 || data.count == 54 else { return nil }
        let version: UInt8 = data.count == 118 ? 2 : 1
        let key = FormatSpec.labelKey(metadataKey, FormatSpecLabel.directory)
        defer { key.wipe() }
        guard ConstantTime.equals(BLAKE2b.mac(key: key, [.data(data.prefix(data.count - 32))]), data.suffix(32)),
              data.subdata(in: 0..<4) == Data("DPDR".utf8), data[4] == version, data[21] <= 5
        else { return nil }
        let places = version == 2 ? [data.subdata(in: 22..<54), data.subdata(in: 54..<86)] : []
        return (data.subdata(in: 5..<21), data[21], places)
    }

    /// §10.2: the place tag of `kind` (`"DPPF"` or `"DPPD"`) for the entry `id` at `name` in `directoryID`.
    static func placeTag(metadataKey: SecureBytes, kind: String, id: Data, directoryID: Data, name: Data) -> Data {
        let key = FormatSpec.labelKey(metadataKey, FormatSpecLabel.place)
        defer { key.wipe() }
        return BLAKE2b.mac(key: key, [.data(Data(kind.utf8)), .data(id), .data(directoryID), .data(name)])
    }

    /// On-disk characters of an `n`-byte name: `ceil(4(40 + n) / 3)`.
    static func encodedLength(nameByteCount: Int) -> Int { (4 * (40 + nameByteCount) + 2) / 3 }
}

// MARK: - A device holding chosen keys

enum FormatVectorDevice {
    /// `key` as the key of every class other than B (a vector's reader holds it for all of them).
    static func symmetricClasses(_ key: Data) -> [KeybagSlot: Data] {
        Dictionary(uniqueKeysWithValues: [KeybagSlot.complete, .completeUntilFirstUserAuthentication, .completeWhenUserInactive, .none]
            .map { ($0, key) })
    }

    /// Writes a device directory whose keybag (no passcode) holds `keys` (random keys in the other slots),
    /// boots it and unlocks it.
    static func boot(at directory: URL, keys given: [KeybagSlot: Data]) throws -> Device {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let uid = Random.bytes(count: 32)
        let effaceable = Random.bytes(count: 32)
        let hierarchy = KeyHierarchy(deviceKey: FileDeviceKey(key: .formatVector(uid)))
        let sealKey = try hierarchy.sealKey(effaceable: .formatVector(effaceable))
        var keys = given
        for slot in KeybagSlot.allCases where keys[slot] == nil { keys[slot] = Random.bytes(count: 32) }
        let publicKey = X25519.publicKey(for: .formatVector(keys[.completeUnlessOpenSecret]!))
        var keybag = Keybag(id: Random.bytes(count: 16), passcode: .none, classBPublicKey: publicKey, slots: [:])
        let passcodeKey = try hierarchy.passcodeKey(passcode: SecureBytes(count: 0), parameters: .none)
        let deviceOnlyKey = try hierarchy.deviceOnlyKey()
        for slot in KeybagSlot.allCases {
            keybag.wrap(.formatVector(keys[slot]!), into: slot, with: slot.isPasscodeWrapped ? passcodeKey : deviceOnlyKey)
        }
        try (Data("DPUK".utf8) + [1] + uid).write(to: directory.appendingPathComponent("uid"))
        try (Data("DPEF".utf8) + [1] + effaceable).write(to: directory.appendingPathComponent("effaceable"))
        try keybag.sealedFile(with: sealKey).write(to: directory.appendingPathComponent("keybag"))
        try AttemptRecord().encoded(macKey: try hierarchy.attemptCounterKey()).write(to: directory.appendingPathComponent("attempts"))
        let device = try Device(directory: FilePath(directory.path), clock: VirtualClock(),
                                configuration: DeviceConfiguration(passcodeCost: .minimal), fileSystem: PosixFileSystem())
        try device.unlock()
        return device
    }
}

/// A fresh directory, removed afterwards.
func withFormatScratchDirectory<R>(_ body: (URL) throws -> R) throws -> R {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("dp-format-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}

extension SecureBytes {
    /// Secret bytes from (public) test data.
    static func formatVector(_ data: Data) -> SecureBytes {
        SecureBytes(count: data.count) { $0.copyBytes(from: data) }
    }
}

// MARK: - Vector files

/// A vector of `Keys/vectors/files` or `Keys/vectors/names`.
typealias FormatVectorFile = VectorFile
