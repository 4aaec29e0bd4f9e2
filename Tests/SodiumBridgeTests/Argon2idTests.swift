import Foundation
import Testing
@testable import SodiumBridge

/// Argon2id (`crypto_pwhash`, Argon2id v1.3): determinism, every input
/// matters, parameter checks.
@Suite("Argon2id")
struct Argon2idTests {
    static let salt = Data(repeating: 0x5A, count: 16)

    static func derive(_ passcode: String, salt: Data = salt, operations: UInt64 = 1, memory: UInt64 = 8192,
                       byteCount: Int = 32) throws -> SecureBytes {
        try Argon2id.deriveKey(byteCount: byteCount, passcode: SecureBytes(copyingUTF8: passcode), salt: salt,
                               operations: operations, memory: memory)
    }

    @Test("the same inputs give the same key")
    func deterministic() throws {
        #expect(try Self.derive("1234").constantTimeEquals(Self.derive("1234")))
    }

    @Test("a different passcode, salt, pass count or memory gives a different key")
    func everyInputMatters() throws {
        let base = try Self.derive("1234")
        #expect(!base.constantTimeEquals(try Self.derive("1235")))
        #expect(!base.constantTimeEquals(try Self.derive("1234", salt: Data(repeating: 0x5B, count: 16))))
        #expect(!base.constantTimeEquals(try Self.derive("1234", operations: 2)))
        #expect(!base.constantTimeEquals(try Self.derive("1234", memory: 16384)))
    }

    @Test("the empty passcode derives a key too")
    func emptyPasscode() throws {
        let key = try Self.derive("")
        #expect(key.count == 32)
        #expect(!key.isZero)
    }

    @Test("the output size is honoured", arguments: [16, 32, 64])
    func outputSize(_ count: Int) throws {
        #expect(try Self.derive("1234", byteCount: count).count == count)
    }

    @Test("a salt that is not 16 bytes is invalidLength", arguments: [0, 15, 17, 32])
    func saltSize(_ count: Int) {
        #expect(throws: SodiumError.invalidLength(what: "Argon2id salt", expected: 16, actual: count)) {
            try Self.derive("1234", salt: Data(count: count))
        }
    }

    @Test("pass counts and memory limits outside libsodium's range are invalidParameter")
    func badParameters() {
        for (operations, memory) in [(UInt64(0), UInt64(8192)), (Argon2id.maximumOperations + 1, 8192), (1, 8191), (1, 0)] {
            #expect(throws: SodiumError.self, "\(operations) passes, \(memory) bytes") {
                try Self.derive("1234", operations: operations, memory: memory)
            }
            do {
                _ = try Self.derive("1234", operations: operations, memory: memory)
            } catch {
                if case SodiumError.invalidParameter = error {} else { Issue.record("\(error) is not invalidParameter") }
            }
        }
    }

    @Test("the published limits are libsodium's: 1 pass and 8 KiB at least, a 16-byte salt")
    func limits() {
        #expect(Argon2id.minimumOperations == 1)
        #expect(Argon2id.minimumMemory == 8192)
        #expect(Argon2id.saltByteCount == 16)
    }
}
