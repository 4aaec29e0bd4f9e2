import Foundation
import SodiumBridge
import Testing
@testable import DataProtection

/// The TPM derivations that need no TPM (`Keys/key-hierarchy.md` §4.4.2, §4.4.4) against
/// `Keys/vectors/tpm-derivations.json` (made by `generate_tpm.py` with Python's BLAKE2b).
@Suite("TPM derivation vectors")
struct TPMDerivationVectorTests {
    struct Vectors: Decodable {
        struct Vector: Decodable {
            var name, stretched, factor, counterKey, authValue, passcodeKey, epochKey: String
            var epoch: UInt64
        }

        var vectors: [Vector]
    }

    static func secure(_ hex: String) -> SecureBytes {
        let bytes = stride(from: 0, to: hex.count, by: 2).map { offset -> UInt8 in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
        }
        return SecureBytes(count: bytes.count) { $0.copyBytes(from: bytes) }
    }

    static func hex(_ bytes: SecureBytes) -> String {
        bytes.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
    }

    @Test("the auth value, the passcode key and the attempt counter's epoch key match the vectors")
    func vectors() throws {
        let url = VectorFile.folder.appendingPathComponent("tpm-derivations.json")
        let file = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: url))
        #expect(file.vectors.count == 2)
        for vector in file.vectors {
            let stretched = Self.secure(vector.stretched)
            #expect(Self.hex(TPMDeviceKey.authValue(stretched: stretched)) == vector.authValue, "\(vector.name)")
            #expect(Self.hex(TPMDeviceKey.passcodeKey(factor: Self.secure(vector.factor), stretched: stretched)) == vector.passcodeKey,
                    "\(vector.name)")
            #expect(Self.hex(DeviceFiles.epochKey(Self.secure(vector.counterKey), vector.epoch)) == vector.epochKey, "\(vector.name)")
        }
    }
}
