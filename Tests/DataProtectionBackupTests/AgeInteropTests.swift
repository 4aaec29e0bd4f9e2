import Foundation
import SodiumBridge
import Testing
@testable import DataProtection
@testable import DataProtectionBackup

/// The age writer and reader against the real `age` 1.x binary: what one writes the other reads.
@Suite("age format: interoperability with the real age binary")
struct AgeInteropTests {
    /// Sizes around the 64 KiB chunk: empty, one byte, one full chunk (sealed as last), one
    /// byte more, two full chunks (the second sealed as last), several chunks.
    static let sizes = [0, 1, 65_536, 65_537, 2 * 65_536, 3 * 65_536 + 100]

    /// Written in pieces of `piece` bytes: small ones go through the encryptor's pending chunk,
    /// one piece of everything has whole chunks sealed straight from it.
    private func encrypt(_ plaintext: Data, to recipients: [AgeRecipient], into url: URL, piece: Int = 10_000) throws {
        let (output, descriptor) = try fileOutput(url)
        defer { try? descriptor.close() }
        let encryptor = try AgeEncryptor(recipients: recipients, output: output)
        var rest = plaintext[...]
        while !rest.isEmpty {
            try encryptor.write(Data(rest.prefix(piece)))
            rest = rest.dropFirst(piece)
        }
        try encryptor.finish()
    }

    private func decrypt(_ url: URL, with identities: [AgeIdentity]) throws -> Data {
        let (input, descriptor) = try fileInput(url)
        defer { try? descriptor.close() }
        let decryptor = try AgeDecryptor(identities: identities, input: input)
        var plaintext = Data()
        while let chunk = try decryptor.nextChunk() { plaintext += chunk }
        return plaintext
    }

    @Test("ours to age -d: X25519, several recipients, every size around a chunk", arguments: sizes)
    func oursToAge(size: Int) throws {
        try withScratch { root in
            let (keyFile, recipient) = try ageKeygen(in: root)
            let (_, other) = try ageKeygen(in: root)
            let plaintext = Random.bytes(count: size)
            for piece in [10_000, Int.max] {
                let archive = root.appendingPathComponent("a-\(piece).age")
                try encrypt(plaintext, to: [try AgeRecipient(other), try AgeRecipient(recipient)], into: archive, piece: piece)
                let result = try run("/usr/bin/age", ["-d", "-i", keyFile.path, archive.path])
                #expect(result.status == 0, "\(result.error)")
                #expect(result.output == plaintext, "pieces of \(piece) bytes")
            }
        }
    }

    @Test("age -r to ours: every size around a chunk; a foreign identity opens nothing", arguments: sizes)
    func ageToOurs(size: Int) throws {
        try withScratch { root in
            let (keyFile, recipient) = try ageKeygen(in: root)
            let plain = root.appendingPathComponent("plain"), archive = root.appendingPathComponent("a.age")
            let plaintext = Random.bytes(count: size)
            try plaintext.write(to: plain)
            let result = try run("/usr/bin/age", ["-r", recipient, "-o", archive.path, plain.path])
            #expect(result.status == 0, "\(result.error)")
            #expect(try decrypt(archive, with: try identities(in: keyFile)) == plaintext)
            #expect(throws: DataProtectionError.self) { try decrypt(archive, with: [AgeIdentity.generate()]) }
        }
    }

    @Test("the age reader alone: a cut at every chunk boundary, a byte after the last chunk and every chunk's flipped byte are integrityFailure")
    func streamEnd() throws {
        try withScratch { root in
            let identity = AgeIdentity.generate()
            let archive = root.appendingPathComponent("s.age")
            try encrypt(Random.bytes(count: 3 * 65_536 + 100), to: [identity.recipient!], into: archive)
            let bytes = try Data(contentsOf: archive)
            let marker = try #require(bytes.range(of: Data("\n--- ".utf8)))
            let payload = bytes[marker.upperBound...].firstIndex(of: UInt8(ascii: "\n"))! + 1 + 16
            var damaged: [(String, Data)] = [("a byte after the end", bytes + Data([0]))]
            for chunk in 0...3 {
                let start = payload + chunk * AgeFormat.sealedChunkByteCount
                if chunk > 0 { damaged.append(("cut before chunk \(chunk)", bytes.prefix(start))) }
                var flipped = bytes
                flipped[min(start + 100, bytes.count - 1)] ^= 1
                damaged.append(("chunk \(chunk) flipped", flipped))
            }
            for (what, data) in damaged {
                let file = root.appendingPathComponent("damaged.age")
                try data.write(to: file)
                #expect(throws: DataProtectionError.self, "\(what)") { try decrypt(file, with: [identity]) }
                do { _ = try decrypt(file, with: [identity]) } catch let error as DataProtectionError {
                    #expect(error.code == .integrityFailure, "\(what): \(error)")
                }
            }
        }
    }

    @Test("our identity file and age1 recipient are age-keygen's: age-keygen -y derives the same recipient")
    func keyEncoding() throws {
        try withScratch { root in
            let identity = AgeIdentity.generate()
            let file = root.appendingPathComponent("id.txt")
            let line = try #require(identity.identityFileLine)
            try line.bytes.withUnsafeBytes { try Data($0).write(to: file) }
            let result = try run("/usr/bin/age-keygen", ["-y", file.path])
            #expect(result.status == 0, "\(result.error)")
            #expect(String(decoding: result.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == identity.recipient?.description)
            // A flipped Bech32 character is refused, not read as another key.
            let text = try #require(identity.recipient?.description)
            var broken = Array(text)
            broken[10] = broken[10] == "q" ? "p" : "q"
            #expect(throws: DataProtectionError.self) { try AgeRecipient(String(broken)) }
        }
    }

    @Test("scrypt: our passphrase archive opens with the same passphrase only; a scrypt stanza beside another is refused")
    func passphrase() throws {
        try withScratch { root in
            let archive = root.appendingPathComponent("p.age")
            let plaintext = Random.bytes(count: 70_000)
            try encrypt(plaintext, to: [try AgeRecipient(passphrase: Passcode("correct horse"), workFactor: 10)], into: archive)
            #expect(try decrypt(archive, with: [AgeIdentity(passphrase: Passcode("correct horse"))]) == plaintext)
            #expect(throws: DataProtectionError.self) { try decrypt(archive, with: [AgeIdentity(passphrase: Passcode("wrong"))]) }
            #expect(throws: DataProtectionError.self) { try decrypt(archive, with: [AgeIdentity(passphrase: Passcode("correct horse"), maxWorkFactor: 9)]) }
            #expect(throws: DataProtectionError.self) {
                try encrypt(plaintext, to: [try AgeRecipient(passphrase: Passcode("x"), workFactor: 10), AgeIdentity.generate().recipient!],
                            into: root.appendingPathComponent("q.age"))
            }
        }
    }

    @Test("age -p (driven on a terminal by script(1)) makes an archive our reader opens with the passphrase")
    func agePassphrase() throws {
        try withScratch { root in
            let plain = root.appendingPathComponent("plain"), archive = root.appendingPathComponent("p.age")
            let plaintext = Random.bytes(count: 100_000)
            try plaintext.write(to: plain)
            try ageWithPassphrase("s3cret passphrase", arguments: ["-p", "-o", archive.path, plain.path], in: root)
            #expect(try decrypt(archive, with: [AgeIdentity(passphrase: Passcode("s3cret passphrase"))]) == plaintext)
        }
    }
}

/// Runs `age ARGUMENTS` on a pseudo-terminal (script(1)), typing `passphrase` twice.
func ageWithPassphrase(_ passphrase: String, arguments: [String], in root: URL) throws {
    let script = root.appendingPathComponent("type.sh")
    let command = (["/usr/bin/age"] + arguments).map { "'\($0)'" }.joined(separator: " ")
    try """
    #!/bin/sh
    (sleep 1; printf '%s\\n' '\(passphrase)'; sleep 1; printf '%s\\n' '\(passphrase)'; sleep 2) | script -qec "\(command)" /dev/null
    """.write(to: script, atomically: true, encoding: .utf8)
    let result = try run("/bin/sh", [script.path])
    #expect(result.status == 0, "\(result.error) \(String(decoding: result.output, as: UTF8.self))")
}
