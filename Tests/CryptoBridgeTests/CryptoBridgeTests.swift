import Foundation
import Testing
@testable import CryptoBridge
import SodiumBridge

/// The Secret Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7` pieces against independent
/// answers: the RFC 2409 group as libcrypto ships it, public keys and shared secrets computed
/// by Python's own integers, HKDF-SHA-256 against RFC 5869, AES-128-CBC against `openssl enc`.
@Suite("CryptoBridge")
struct CryptoBridgeTests {
    static func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    static func bytes(_ hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            result.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return result
    }
    static func secure(_ bytes: [UInt8]) -> SecureBytes {
        SecureBytes(count: bytes.count) { $0.copyBytes(from: bytes) }
    }

    /// Runs `program` with `arguments`, feeding `input`; its standard output, after checking it exited 0.
    static func run(_ program: String, _ arguments: [String], input: Data = Data()) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(program) \(arguments) exited \(process.terminationStatus)")
        return output
    }

    @Test("the group's prime is RFC 2409's second Oakley group as libcrypto ships it")
    func prime() {
        #expect(ModularDiffieHellman.primeHex == ModularDiffieHellman.libcryptoPrimeHex)
        #expect(ModularDiffieHellman.primeHex.count == 256)
    }

    @Test("public keys and the shared secret agree with Python's integers; both sides agree")
    func diffieHellman() throws {
        let a = [UInt8](repeating: 0x11, count: 127) + [0x05]
        let b = (0..<128).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 1) }
        let alice = try ModularDiffieHellman(privateKey: Self.secure(a))
        let bob = try ModularDiffieHellman(privateKey: Self.secure(b))
        let script = """
            import sys
            p = int('\(ModularDiffieHellman.primeHex)', 16)
            a = int('\(Self.hex(a))', 16); b = int('\(Self.hex(b))', 16)
            print(pow(2, a, p).to_bytes(128, 'big').hex()); print(pow(2, b, p).to_bytes(128, 'big').hex())
            print(pow(pow(2, b, p), a, p).to_bytes(128, 'big').hex())
            """
        let lines = String(decoding: try Self.run("/usr/bin/python3", ["-c", script]), as: UTF8.self).split(separator: "\n").map(String.init)
        try #require(lines.count == 3)
        #expect(Self.hex(alice.publicKey) == lines[0])
        #expect(Self.hex(bob.publicKey) == lines[1])
        let shared = try alice.sharedSecret(peerPublicKey: bob.publicKey)
        #expect(shared.withUnsafeBytes { Self.hex($0) } == lines[2])
        #expect(try bob.sharedSecret(peerPublicKey: alice.publicKey).constantTimeEquals(shared))
        // A peer key without its leading zero bytes (libsecret sends it unpadded) gives the same secret.
        let random = try ModularDiffieHellman()
        let stripped = random.publicKey.drop { $0 == 0 }
        #expect(try alice.sharedSecret(peerPublicKey: stripped).constantTimeEquals(random.sharedSecret(peerPublicKey: alice.publicKey)))
    }

    @Test("peer keys 0, 1, p-1 and p are refused")
    func degenerateKeys() throws {
        let pair = try ModularDiffieHellman()
        let prime = Self.bytes(ModularDiffieHellman.primeHex)
        var primeMinusOne = prime
        primeMinusOne[127] -= 1
        for key in [[UInt8(0)], [1], primeMinusOne, prime] {
            #expect(throws: CryptoError.self) { try pair.sharedSecret(peerPublicKey: key) }
        }
    }

    @Test("HKDF-SHA-256 with an empty salt and info gives RFC 5869's test case 3")
    func hkdf() throws {
        let key = try HKDF.sha256(inputKey: Self.secure([UInt8](repeating: 0x0b, count: 22)), length: 42)
        #expect(key.withUnsafeBytes { Self.hex($0) }
            == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
        // Test case 1 (salt and info).
        let case1 = try HKDF.sha256(inputKey: Self.secure([UInt8](repeating: 0x0b, count: 22)), salt: Self.bytes("000102030405060708090a0b0c"),
                                    info: Self.bytes("f0f1f2f3f4f5f6f7f8f9"), length: 42)
        #expect(case1.withUnsafeBytes { Self.hex($0) }
            == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
    }

    @Test("AES-128-CBC with PKCS#7 agrees with openssl enc both ways, for 0 to 33 bytes")
    func aesCBC() throws {
        let key = (0..<16).map { UInt8($0 * 3 + 1) }
        let iv = (0..<16).map { UInt8(255 - $0) }
        for length in [0, 1, 15, 16, 17, 32, 33] {
            let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }
            let ours = try AES128CBC.encrypt(Self.secure(plaintext), key: Self.secure(key), iv: iv)
            let theirs = try Self.run("/usr/bin/openssl", ["enc", "-aes-128-cbc", "-K", Self.hex(key), "-iv", Self.hex(iv)], input: Data(plaintext))
            #expect(ours == Array(theirs), "length \(length)")
            #expect(ours.count == (length / 16 + 1) * 16)
            let back = try AES128CBC.decrypt(Array(theirs), key: Self.secure(key), iv: iv)
            #expect(back.withUnsafeBytes { Array($0) } == plaintext)
        }
        // A wrong key fails the padding check (almost always; this key and text do).
        let sealed = try AES128CBC.encrypt(Self.secure(Array("secret".utf8)), key: Self.secure(key), iv: iv)
        #expect(throws: CryptoError.self) { try AES128CBC.decrypt(sealed, key: Self.secure([UInt8](repeating: 9, count: 16)), iv: iv) }
        #expect(throws: CryptoError.self) { try AES128CBC.decrypt(Array(sealed.dropLast()), key: Self.secure(key), iv: iv) }
    }
}
