import Foundation

/// Writes fixed-width little-endian fields into public bytes whose size is known in advance
/// (file headers, keybag bodies, attempt records, directory metadata, journals), in place in
/// the `Data` handed out: nothing gathered and copied (a commit's journal holds some 6 KB of
/// records), and no `Data` append per field (a thousand instructions each). A field past the
/// end traps, and so do bytes left unwritten: every byte handed out was written.
struct ByteWriter {
    private let buffer: UnsafeMutableRawBufferPointer
    /// How many bytes were written so far.
    private(set) var count = 0

    private init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    /// The `byteCount` bytes that `fields` writes, every one of them.
    static func data(byteCount: Int, _ fields: (inout ByteWriter) -> Void) -> Data {
        var data = Data(uninitializedCount: byteCount)
        data.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(buffer)
            fields(&writer)
            precondition(writer.count == byteCount, "\(writer.count) bytes written of \(byteCount)")
        }
        return data
    }

    /// The bytes written so far (for an encoding that authenticates its own fields).
    var written: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: buffer[..<count]) }

    mutating func append(_ data: Data) {
        precondition(data.count <= buffer.count - count, "a field past the end of its buffer")
        data.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: buffer[count..<count + $0.count]).copyMemory(from: $0) }
        count += data.count
    }
    mutating func append(_ value: UInt8) { appendLittleEndian(value) }
    mutating func append(_ value: UInt32) { appendLittleEndian(value) }
    mutating func append(_ value: UInt64) { appendLittleEndian(value) }
    mutating func append(_ value: Int64) { appendLittleEndian(value) }

    private mutating func appendLittleEndian<Value: FixedWidthInteger>(_ value: Value) {
        let size = MemoryLayout<Value>.size
        precondition(size <= buffer.count - count, "a field past the end of its buffer")
        buffer.storeBytes(of: value.littleEndian, toByteOffset: count, as: Value.self)
        count += size
    }
}

/// Reads fixed-width little-endian fields; every read is bounds-checked and a
/// short input is reported as corrupt, never a crash.
struct ByteReader {
    private let data: Data
    private(set) var offset: Int
    /// What is being parsed, for error messages ("keybag", "attempt counter").
    let what: String

    init(_ data: Data, what: String) {
        self.data = Data(data)   // re-base indices at 0
        self.offset = 0
        self.what = what
    }

    /// Reads `data` (indexed from 0) from `offset` on, without copying it.
    init(_ data: Data, from offset: Int, what: String) {
        precondition(data.startIndex == 0 && (0...data.count).contains(offset), "a reader outside its data")
        self.data = data
        self.offset = offset
        self.what = what
    }

    var remaining: Int { data.count - offset }

    mutating func bytes(_ count: Int) throws(DataProtectionError) -> Data {
        guard count >= 0, remaining >= count else {
            throw .integrity("The \(what) is truncated (needed \(count) more bytes at offset \(offset), found \(remaining)).")
        }
        defer { offset += count }
        return data.subdata(in: offset..<offset + count)
    }

    mutating func uint8() throws(DataProtectionError) -> UInt8 { try bytes(1)[0] }

    mutating func uint32() throws(DataProtectionError) -> UInt32 {
        try bytes(4).reversed().reduce(0) { ($0 << 8) | UInt32($1) }
    }

    mutating func uint64() throws(DataProtectionError) -> UInt64 {
        try bytes(8).reversed().reduce(0) { ($0 << 8) | UInt64($1) }
    }

    mutating func int64() throws(DataProtectionError) -> Int64 { Int64(bitPattern: try uint64()) }

    /// Checks a magic string.
    mutating func expect(ascii magic: String) throws(DataProtectionError) {
        let found = try bytes(magic.utf8.count)
        guard found == Data(magic.utf8) else {
            throw .integrity("The \(what) does not start with the magic \"\(magic)\": not a DataProtection file, or corrupt.")
        }
    }

    /// Checks that everything was consumed.
    func expectEnd() throws(DataProtectionError) {
        guard remaining == 0 else {
            throw .integrity("The \(what) has \(remaining) unexpected trailing bytes.")
        }
    }
}
