import CSodium
import Foundation

/// Sealing and opening of file chunk records in place, without intermediate copies.
///
/// A record is `nonce(24) || ciphertext || tag(16)` (XChaCha20-Poly1305, a fresh
/// random nonce for every seal). Plaintext may live in a public `Data` (what a
/// caller handed in or asked for) or in ``SecureBytes`` (buffers the store
/// holds); records always live in public `Data` (they are ciphertext).
package enum ChunkRecords {
    /// Bytes a record adds to its plaintext: nonce and tag.
    package static let overhead = XChaCha20Poly1305.nonceByteCount + XChaCha20Poly1305.tagByteCount

    /// Seals `plaintext[range]` into `records` at `offset` (which must have room for `range.count + overhead` bytes).
    package static func seal(
        _ plaintext: Data, range: Range<Int>, into records: inout Data, at offset: Int,
        key: SecureBytes, associatedData: Data
    ) {
        var nonces = ChunkNonces(count: 1)
        seal(plaintext, range: range, into: &records, at: offset, key: key, associatedData: associatedData, nonces: &nonces)
    }

    /// Seals `plaintext[range]` into `records` at `offset`, its nonce the next of `nonces`.
    package static func seal(
        _ plaintext: Data, range: Range<Int>, into records: inout Data, at offset: Int,
        key: SecureBytes, associatedData: Data, nonces: inout ChunkNonces
    ) {
        plaintext.withUnsafeBytes { source in
            seal(UnsafeRawBufferPointer(rebasing: source[range]), into: &records, at: offset, key: key,
                 associatedData: associatedData, nonces: &nonces)
        }
    }

    /// Seals `plaintext[range]` (secure memory) into `records` at `offset`.
    package static func seal(
        _ plaintext: SecureBytes, range: Range<Int>, into records: inout Data, at offset: Int,
        key: SecureBytes, associatedData: Data
    ) {
        var nonces = ChunkNonces(count: 1)
        seal(plaintext, range: range, into: &records, at: offset, key: key, associatedData: associatedData, nonces: &nonces)
    }

    /// Seals `plaintext[range]` (secure memory) into `records` at `offset`, its nonce the next of `nonces`.
    package static func seal(
        _ plaintext: SecureBytes, range: Range<Int>, into records: inout Data, at offset: Int,
        key: SecureBytes, associatedData: Data, nonces: inout ChunkNonces
    ) {
        plaintext.withUnsafeBytes { source in
            seal(UnsafeRawBufferPointer(rebasing: source[range]), into: &records, at: offset, key: key,
                 associatedData: associatedData, nonces: &nonces)
        }
    }

    /// Opens the record `records[range]` into `plaintext` at `offset`; returns the plaintext length.
    /// Nothing is written unless the record authenticates.
    @discardableResult
    package static func open(
        _ records: Data, range: Range<Int>, into plaintext: inout Data, at offset: Int,
        key: SecureBytes, associatedData: Data
    ) throws(SodiumError) -> Int {
        let length = try plaintextLength(range)
        precondition(offset >= 0 && offset + length <= plaintext.count, "record plaintext out of bounds")
        let ok = plaintext.withUnsafeMutableBytes { out in
            open(records, range: range, into: out.baseAddress.map { $0 + offset }, key: key, associatedData: associatedData)
        }
        guard ok else { throw .authenticationFailed }
        return length
    }

    /// Opens the record `records[range]` into secure memory at `offset`; returns the plaintext length.
    @discardableResult
    package static func open(
        _ records: Data, range: Range<Int>, into plaintext: SecureBytes, at offset: Int,
        key: SecureBytes, associatedData: Data
    ) throws(SodiumError) -> Int {
        let length = try plaintextLength(range)
        precondition(offset >= 0 && offset + length <= plaintext.count, "record plaintext out of bounds")
        let ok = plaintext.withUnsafeMutableBytes { out in
            open(records, range: range, into: out.baseAddress.map { $0 + offset }, key: key, associatedData: associatedData)
        }
        guard ok else { throw .authenticationFailed }
        return length
    }

    // MARK: - Internals

    private static func plaintextLength(_ range: Range<Int>) throws(SodiumError) -> Int {
        guard range.count >= overhead else { throw .authenticationFailed }
        return range.count - overhead
    }

    private static func seal(
        _ plaintext: UnsafeRawBufferPointer, into records: inout Data, at offset: Int, key: SecureBytes, associatedData: Data,
        nonces: inout ChunkNonces
    ) {
        Sodium.ensureInitialized()
        precondition(key.count == XChaCha20Poly1305.keyByteCount, "chunk key must be 32 bytes")
        precondition(offset >= 0 && offset + plaintext.count + overhead <= records.count, "record out of bounds")
        records.withUnsafeMutableBytes { out in
            let record = out.baseAddress! + offset
            nonces.take(into: record)
            key.withUnsafeBytes { k in
                associatedData.withUnsafeBytes { ad in
                    sealRecord(plaintext, at: record, key: k, associatedData: ad, nonceWritten: true)
                }
            }
        }
    }

    private static func open(
        _ records: Data, range: Range<Int>, into out: UnsafeMutableRawPointer?, key: SecureBytes, associatedData: Data
    ) -> Bool {
        Sodium.ensureInitialized()
        guard key.count == XChaCha20Poly1305.keyByteCount else { return false }
        return records.withUnsafeBytes { raw in
            key.withUnsafeBytes { k in
                associatedData.withUnsafeBytes { ad in
                    openRecord(UnsafeRawBufferPointer(rebasing: raw[range]), into: out, key: k, associatedData: ad)
                }
            }
        }
    }

    // MARK: - The record itself (also used by ChunkBatch's workers)

    /// Seals `plaintext` into the record at `record` (room for `plaintext.count + overhead`
    /// bytes): a fresh random nonce (drawn here unless `nonceWritten`: then the caller wrote one
    /// at `record`), then ciphertext and tag. `key` is 32 bytes.
    static func sealRecord(
        _ plaintext: UnsafeRawBufferPointer, at record: UnsafeMutableRawPointer,
        key: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, nonceWritten: Bool = false
    ) {
        if !nonceWritten { randombytes_buf(record, XChaCha20Poly1305.nonceByteCount) }
        var sealedLength: UInt64 = 0
        _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
            (record + XChaCha20Poly1305.nonceByteCount).assumingMemoryBound(to: UInt8.self), &sealedLength,
            plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
            associatedData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(associatedData.count),
            nil,
            record.assumingMemoryBound(to: UInt8.self),
            key.baseAddress!.assumingMemoryBound(to: UInt8.self))
    }

    /// Opens `record` (at least ``overhead`` bytes) into `out`; `false`, with nothing
    /// written, unless it authenticates. `key` is 32 bytes.
    static func openRecord(
        _ record: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer?,
        key: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer
    ) -> Bool {
        var length: UInt64 = 0
        return crypto_aead_xchacha20poly1305_ietf_decrypt(
            out?.assumingMemoryBound(to: UInt8.self), &length, nil,
            (record.baseAddress! + XChaCha20Poly1305.nonceByteCount).assumingMemoryBound(to: UInt8.self),
            UInt64(record.count - XChaCha20Poly1305.nonceByteCount),
            associatedData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(associatedData.count),
            record.baseAddress!.assumingMemoryBound(to: UInt8.self),
            key.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
    }
}

/// Fresh random nonces for the records one flush seals, drawn from the system's generator
/// in one call (`randombytes_buf`, a `getrandom` each) rather than one per record: a SQLite
/// WAL commit seals two. Each is handed out once, and a batch lives no longer than the flush
/// that drew it (a process forked meanwhile cannot hand out the same ones). Nonces are public:
/// each is written beside its ciphertext.
package struct ChunkNonces {
    private let batch: Int
    private var bytes = Data()
    private var next = 0

    /// Nonces drawn `count` (at least one) at a time, the first batch when the first is taken.
    package init(count: Int) {
        batch = max(1, count) * XChaCha20Poly1305.nonceByteCount
    }

    /// Writes the next nonce at `destination`, drawing a batch when none is left.
    mutating func take(into destination: UnsafeMutableRawPointer) {
        let size = XChaCha20Poly1305.nonceByteCount
        if next + size > bytes.count {
            bytes = Random.bytes(count: batch)
            next = 0
        }
        bytes.withUnsafeBytes { destination.copyMemory(from: $0.baseAddress! + next, byteCount: size) }
        next += size
    }
}

extension SecureBytes {
    /// A public copy of `range` (plaintext handed back to a caller who asked for it).
    package func copyBytes(in range: Range<Int>) -> Data {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "SecureBytes range out of bounds")
        return withUnsafeBytes { Data(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// Copies `range` into `data` at `offset` (plaintext handed back to a caller who asked for it).
    package func copyBytes(in range: Range<Int>, into data: inout Data, at offset: Int) {
        data.withUnsafeMutableBytes { copyBytes(in: range, to: $0, at: offset) }
    }

    /// Copies `range` into `destination` at `offset`: plaintext handed straight to a caller's
    /// buffer (SQLite's page), with no copy of it left in ordinary memory on the way.
    package func copyBytes(in range: Range<Int>, to destination: UnsafeMutableRawBufferPointer, at offset: Int) {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "SecureBytes range out of bounds")
        precondition(offset >= 0 && offset + range.count <= destination.count, "destination range out of bounds")
        guard !range.isEmpty else { return }
        withUnsafeBytes { source in
            UnsafeMutableRawBufferPointer(rebasing: destination[offset..<offset + range.count])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[range]))
        }
    }

    /// Copies `data[range]` into these bytes at `offset`.
    package func replaceBytes(at offset: Int, with data: Data, range: Range<Int>) {
        precondition(offset >= 0 && offset + range.count <= count, "SecureBytes range out of bounds")
        withUnsafeMutableBytes { out in
            data.withUnsafeBytes { source in
                UnsafeMutableRawBufferPointer(rebasing: out[offset..<offset + range.count])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[range]))
            }
        }
    }

    /// Zeroes `range`.
    package func zeroBytes(in range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "SecureBytes range out of bounds")
        guard !range.isEmpty else { return }
        withUnsafeMutableBytes { out in sodium_memzero(out.baseAddress! + range.lowerBound, range.count) }
    }
}
