import DataProtection
import DataProtectionSQLite
import Foundation
import SodiumBridge
import Testing

/// Key hygiene with item secrets: once the `complete` key is discarded, no secret of a
/// `whenUnlocked` item is left anywhere in the process (SQLite's page cache, its freed blocks,
/// the keychain's buffers), though each was added and read back before the lock.
@Suite("Keychain memory at the key discard", .serialized,
       .enabled(if: ProcessInfo.processInfo.environment["DP_SANITIZER"] == nil,
                "the sanitizers' shadow memory is terabytes of readable reservations"))
struct KeychainMemoryTests {
    /// Secret `number`: `KCH<seed>-<number, 4 digits>-HCK`, built in secure memory (never a String:
    /// a String's freed copy would be a false finding).
    static func secret(seed: String, number: Int) -> SecureBytes {
        SecureBytes(count: 3 + seed.utf8.count + 5 + 4) { out in
            var index = 0
            func put(_ bytes: some Sequence<UInt8>) { for byte in bytes { out[index] = byte; index += 1 } }
            put("KCH".utf8)
            put(seed.utf8)
            put([UInt8(ascii: "-")])
            var digits = [UInt8](repeating: UInt8(ascii: "0"), count: 4)
            var rest = number
            for position in stride(from: 3, through: 0, by: -1) {
                digits[position] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            }
            put(digits)
            put("-HCK".utf8)
        }
    }

    @Test("after the lock (grace 0), none of 40 whenUnlocked secrets, added and read back, is left in memory")
    func noSecretAfterTheDiscard() throws {
        #if os(Linux)
        try withDatabaseStore { fixture in
            let keychain = fixture.store.keychain
            let seed = String(UInt64.random(in: 1 << 60..<UInt64.max), radix: 36)
            var needles: [SecretRecorder.Secret] = []
            var ids: [String] = []
            for number in 0..<40 {
                let bytes = Self.secret(seed: seed, number: number)
                needles.append(bytes.withUnsafeBytes { SecretRecorder.Secret(label: "secret \(number)", bytes: $0) })
                let item = try keychain.add(ItemSecret(secure: SecureBytes(copying: bytes)), label: "item \(number)",
                                            attributes: ["n": "\(number)"], accessibility: .whenUnlocked)
                bytes.wipe()
                ids.append(item.id)
            }
            for id in ids {
                let read = try keychain.secret(ofItemWithID: id)
                #expect(read.byteCount == 3 + seed.utf8.count + 5 + 4)
            }
            // Positive control: the secrets are in SQLite's page cache now.
            let before = try MemoryScanner.scan(for: needles)
            #expect(!before.findings.isEmpty, "secrets cached before the lock: \(before.findings.count) found")

            try fixture.device.lock()
            #expect(try keychain.items(matching: [:]).lockedAccessibilities.contains(.whenUnlocked))
            let after = try MemoryScanner.scan(for: needles)
            print("Keychain at the discard: \(needles.count) secrets searched, \(before.findings.count) copies before, "
                  + "\(after.findings.count) after, \(after.bytesScanned) bytes scanned")
            #expect(after.bytesScanned > 1 << 20)
            // None: SQLite's page cache is released (wiped) at the discard, and the connection
            // closes, which frees (wipes) the one-page scratch buffer where SQLite's B-tree layer
            // assembles each record it inserts (the last secret written stayed there before).
            #expect(after.findings.isEmpty, "left in memory: \(after.findings.prefix(20))")
            try fixture.unlock()
            #expect(try keychain.secret(ofItemWithID: ids[7]).withUnsafeBytes { $0.count } > 0)
        }
        #endif
    }
}
