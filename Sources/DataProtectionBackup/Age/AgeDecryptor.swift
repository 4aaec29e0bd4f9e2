import DataProtection
import Foundation
import SodiumBridge

/// Reads an age v1 file: parses and authenticates the header with one of `identities`, then
/// hands out the payload chunk by chunk, each authenticated before it is released. The end
/// is only accepted at a chunk sealed as the last, with nothing after it.
final class AgeDecryptor {
    private let reader: ByteReader
    private let payloadKey: SecureBytes
    private var counter: UInt64 = 0
    private var ended = false
    /// The recipient stanza types of the header, in order (for `verify`).
    let stanzaTypes: [String]

    init(identities: [AgeIdentity], input: BackupInput) throws(DataProtectionError) {
        let reader = ByteReader(input)
        self.reader = reader
        var header = Data()
        func line() throws(DataProtectionError) -> Data {
            guard header.count < AgeFormat.headerByteLimit,
                  let line = try reader.readLine(limit: AgeFormat.headerByteLimit) else {
                throw AgeFormat.malformed("the header ends early")
            }
            return line
        }
        let version = try line()
        guard version == AgeFormat.versionLine else { throw AgeFormat.malformed("it does not start with age-encryption.org/v1") }
        header = version + Data("\n".utf8)
        var stanzas: [AgeStanza] = []
        var next = try line()
        while next.starts(with: Data("-> ".utf8)) {
            header += next + Data("\n".utf8)
            let fields = next.dropFirst(3).split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
            guard !fields.isEmpty, fields.allSatisfy({ !$0.isEmpty && $0.allSatisfy { (33...126).contains($0) } }) else {
                throw AgeFormat.malformed("a stanza line is malformed")
            }
            let strings = fields.map { String(decoding: $0, as: UTF8.self) }
            var base64 = ""
            while true {
                let bodyLine = try line()
                header += bodyLine + Data("\n".utf8)
                guard bodyLine.count <= AgeFormat.bodyColumns else { throw AgeFormat.malformed("a stanza body line is too long") }
                base64 += String(decoding: bodyLine, as: UTF8.self)
                if bodyLine.count < AgeFormat.bodyColumns { break }
            }
            guard let body = AgeFormat.unbase64(base64) else { throw AgeFormat.malformed("a stanza body is not canonical base64") }
            stanzas.append(AgeStanza(type: strings[0], arguments: Array(strings.dropFirst()), body: body))
            next = try line()
        }
        guard !stanzas.isEmpty else { throw AgeFormat.malformed("the header has no recipient stanza") }
        guard next.starts(with: Data("--- ".utf8)), let mac = AgeFormat.unbase64(String(decoding: next.dropFirst(4), as: UTF8.self)),
              mac.count == HMACSHA256.byteCount
        else { throw AgeFormat.malformed("the header's MAC line is malformed") }
        header += Data("---".utf8)
        if stanzas.contains(where: { $0.type == "scrypt" }) && stanzas.count > 1 {
            throw AgeFormat.malformed("a scrypt stanza is not alone")
        }
        stanzaTypes = stanzas.map(\.type)
        var fileKey: SecureBytes?
        search: for identity in identities {
            for stanza in stanzas {
                if let key = try identity.unwrap(stanza) {
                    fileKey = key
                    break search
                }
            }
        }
        guard let fileKey else {
            throw DataProtectionError(.integrityFailure, "No identity given opens this archive (it is encrypted to others, or not a backup at all).",
                                      hint: "Pass the identity file (-i) or the passphrase (--passphrase) the backup was made for.")
        }
        guard fileKey.count == AgeFormat.fileKeyByteCount else { throw AgeFormat.malformed("the file key is not 16 bytes") }
        let expected = HMACSHA256.tag(key: AgeFormat.headerKey(fileKey), message: header)
        let given = SecureBytes(count: mac.count) { $0.copyBytes(from: mac) }
        guard given.constantTimeEquals(SecureBytes(count: expected.count) { $0.copyBytes(from: expected) }) else {
            throw DataProtectionError(.integrityFailure, "The archive's header does not authenticate: it was tampered with.")
        }
        let nonce = try reader.read(AgeFormat.payloadNonceByteCount)
        guard nonce.count == AgeFormat.payloadNonceByteCount else { throw AgeFormat.malformed("the payload nonce is missing") }
        payloadKey = AgeFormat.payloadKey(fileKey, nonce: nonce)
    }

    /// Bytes of the archive read so far.
    var consumed: UInt64 { reader.consumed }

    /// The next authenticated chunk of plaintext; `nil` once the last chunk was handed out.
    func nextChunk() throws(DataProtectionError) -> Data? {
        guard !ended else { return nil }
        let sealed = try reader.read(AgeFormat.sealedChunkByteCount)
        let last = sealed.count < AgeFormat.sealedChunkByteCount ? true : try reader.atEnd()
        guard sealed.count > ChaCha20Poly1305.tagByteCount || (sealed.count == ChaCha20Poly1305.tagByteCount && counter == 0) else {
            throw DataProtectionError(.integrityFailure, "The archive is truncated (it ends without its last chunk).",
                                      hint: "The copy was cut short; use a complete one.")
        }
        guard let plaintext = try? ChaCha20Poly1305.open(sealed, using: payloadKey, nonce: AgeFormat.chunkNonce(counter, last: last)) else {
            if last, (try? ChaCha20Poly1305.open(sealed, using: payloadKey, nonce: AgeFormat.chunkNonce(counter, last: false))) != nil {
                throw DataProtectionError(.integrityFailure, "The archive is truncated (it ends without its last chunk).",
                                          hint: "The copy was cut short; use a complete one.")
            }
            throw DataProtectionError(.integrityFailure, "Chunk \(counter) of the archive does not authenticate: it was tampered with.")
        }
        counter += 1
        if last { ended = true }
        return plaintext
    }
}

/// Plaintext of an ``AgeDecryptor`` as a byte stream of exact reads (for the tar reader),
/// its chunks decrypted on a thread of their own (``BackgroundPipe``) while the caller stores them.
final class AgePlaintextReader {
    private let pipe: BackgroundPipe
    private var chunk = Data()
    private var offset = 0
    /// Plaintext bytes handed out so far.
    private(set) var consumed: UInt64 = 0

    init(_ decryptor: AgeDecryptor) {
        let box = DecryptorBox(decryptor)
        pipe = BackgroundPipe.producing { () throws(DataProtectionError) -> Data? in try box.decryptor.nextChunk() }
    }

    /// Stops the decrypting thread and waits for it (call before the input is closed).
    func close() { pipe.cancel() }

    /// Up to `count` bytes; fewer only at the end of the payload.
    func read(_ count: Int) throws(DataProtectionError) -> Data {
        var result = Data()
        result.reserveCapacity(count)
        while result.count < count {
            if offset == chunk.count {
                chunk.resetBytes(in: 0..<chunk.count)
                guard let next = try pipe.receive() else { break }
                chunk = next
                offset = 0
                continue
            }
            let take = min(count - result.count, chunk.count - offset)
            result.append(chunk[(chunk.startIndex + offset)..<(chunk.startIndex + offset + take)])
            offset += take
        }
        consumed += UInt64(result.count)
        return result
    }

    /// Up to `count` bytes, at most the rest of the current chunk (no copy when that is the
    /// whole chunk); empty only at the end of the payload.
    func readAvailable(upTo count: Int) throws(DataProtectionError) -> Data {
        if offset == chunk.count {
            guard let next = try pipe.receive() else { return Data() }
            chunk = next
            offset = 0
        }
        let take = min(count, chunk.count - offset)
        let piece = offset == 0 && take == chunk.count ? chunk : Data(chunk[(chunk.startIndex + offset)..<(chunk.startIndex + offset + take)])
        offset += take
        consumed += UInt64(take)
        return piece
    }

    /// Reads the payload to its end (the last chunk, authenticated).
    func drain() throws(DataProtectionError) -> Int {
        var count = chunk.count - offset
        offset = chunk.count
        while let next = try pipe.receive() { count += next.count }
        return count
    }
}

/// Hands the decryptor to the decrypting thread: from then on only that thread uses it,
/// until ``AgePlaintextReader/close()`` has joined it.
private final class DecryptorBox: @unchecked Sendable {
    let decryptor: AgeDecryptor
    init(_ decryptor: AgeDecryptor) { self.decryptor = decryptor }
}
