import DataProtection
import Foundation
import SodiumBridge

/// Writes an age v1 file: the header for `recipients`, then the payload in STREAM chunks of
/// 64 KiB, holding at most one chunk of plaintext at a time.
package final class AgeEncryptor {
    private let output: BackupOutput
    private let payloadKey: SecureBytes
    private var pending = Data()
    /// The sealed chunk, one buffer reused for every chunk (ciphertext: nothing to wipe).
    private var sealed = Data(count: AgeFormat.chunkByteCount + ChaCha20Poly1305.tagByteCount)
    private var counter: UInt64 = 0
    private var finished = false
    /// Bytes written to the output so far.
    private(set) var written: UInt64 = 0

    package init(recipients: [AgeRecipient], output: BackupOutput) throws(DataProtectionError) {
        guard !recipients.isEmpty else {
            throw DataProtectionError(.invalidArgument, "A backup needs at least one recipient (-r, -R or --passphrase).")
        }
        if recipients.contains(where: \.isPassphrase) && recipients.count > 1 {
            throw DataProtectionError(.invalidArgument, "A passphrase archive has no other recipient (the age format forbids it).",
                                      hint: "Use either --passphrase or -r/-R.")
        }
        self.output = output
        let fileKey = SecureBytes.random(count: AgeFormat.fileKeyByteCount)
        var header = AgeFormat.versionLine + Data("\n".utf8)
        for recipient in recipients { header += try recipient.stanza(wrapping: fileKey).encoded }
        header += Data("---".utf8)
        let mac = HMACSHA256.tag(key: AgeFormat.headerKey(fileKey), message: header)
        header += Data(" \(AgeFormat.base64(mac))\n".utf8)
        let nonce = Random.bytes(count: AgeFormat.payloadNonceByteCount)
        payloadKey = AgeFormat.payloadKey(fileKey, nonce: nonce)
        try emit(header + nonce)
        pending.reserveCapacity(AgeFormat.chunkByteCount)
    }

    private func emit(_ data: Data) throws(DataProtectionError) {
        try output.write(data)
        written += UInt64(data.count)
    }

    /// Appends plaintext; seals each chunk once the next byte shows it is not the last. A whole
    /// chunk with more bytes after it is sealed straight from `data`, without a copy.
    package func write(_ data: Data) throws(DataProtectionError) {
        precondition(!finished, "write after finish")
        var rest = data[...]
        while !rest.isEmpty {
            if pending.count == AgeFormat.chunkByteCount { try sealPending(last: false) }
            if pending.isEmpty && rest.count > AgeFormat.chunkByteCount {
                try rest.prefix(AgeFormat.chunkByteCount).withUnsafeBytes { chunk in
                    Result { () throws(DataProtectionError) in try seal(chunk, last: false) }
                }.get()
                rest = rest.dropFirst(AgeFormat.chunkByteCount)
                continue
            }
            let take = min(rest.count, AgeFormat.chunkByteCount - pending.count)
            pending.append(contentsOf: rest.prefix(take))
            rest = rest.dropFirst(take)
        }
    }

    /// Seals the last chunk (empty only when the whole payload is).
    package func finish() throws(DataProtectionError) {
        precondition(!finished, "finish twice")
        try sealPending(last: true)
        finished = true
    }

    /// Seals the pending chunk, then wipes it.
    private func sealPending(last: Bool) throws(DataProtectionError) {
        try pending.withUnsafeBytes { chunk in
            Result { () throws(DataProtectionError) in try seal(chunk, last: last) }
        }.get()
        pending.resetBytes(in: 0..<pending.count)
        pending.removeAll(keepingCapacity: true)
    }

    private func seal(_ chunk: UnsafeRawBufferPointer, last: Bool) throws(DataProtectionError) {
        let nonce = AgeFormat.chunkNonce(counter, last: last)
        let length = chunk.count + ChaCha20Poly1305.tagByteCount
        let key = payloadKey
        try sealed.withUnsafeMutableBytes { out in
            Result { () throws(DataProtectionError) in
                try AgeFormat.sodium { () throws(SodiumError) in
                    try ChaCha20Poly1305.seal(chunk, into: UnsafeMutableRawBufferPointer(rebasing: out.prefix(length)), using: key, nonce: nonce)
                }
            }
        }.get()
        counter += 1
        try emit(sealed.prefix(length))
    }
}
