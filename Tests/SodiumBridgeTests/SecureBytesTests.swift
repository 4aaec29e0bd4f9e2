import Foundation
import Testing
@testable import SodiumBridge

/// SecureBytes: the only home of secrets. Wiping, comparing, slicing and
/// describing them.
@Suite("SecureBytes")
struct SecureBytesTests {
    static func bytes(_ values: [UInt8]) -> SecureBytes {
        SecureBytes(count: values.count) { $0.copyBytes(from: values) }
    }

    static func contents(_ secret: SecureBytes) -> [UInt8] {
        secret.withUnsafeBytes { Array($0) }
    }

    @Test("a new buffer is zeroed; wipe zeroes a filled one and keeps its size")
    func zeroAndWipe() {
        #expect(SecureBytes(count: 32).isZero)
        let secret = SecureBytes.random(count: 32)
        #expect(!secret.isZero)
        secret.wipe()
        #expect(secret.isZero)
        #expect(secret.count == 32)
        #expect(Self.contents(secret) == [UInt8](repeating: 0, count: 32))
    }

    @Test("an empty buffer is fine: zero, equal to another empty one, wipeable")
    func empty() {
        let empty = SecureBytes(count: 0)
        #expect(empty.isZero)
        #expect(empty.constantTimeEquals(SecureBytes(copyingUTF8: "")))
        empty.wipe()
        #expect(empty.hasPrefix(Data()))
    }

    @Test("constantTimeEquals compares content and size")
    func equality() {
        let secret = Self.bytes([1, 2, 3, 4])
        #expect(secret.constantTimeEquals(Self.bytes([1, 2, 3, 4])))
        #expect(!secret.constantTimeEquals(Self.bytes([1, 2, 3, 5])))
        #expect(!secret.constantTimeEquals(Self.bytes([1, 2, 3])))
        #expect(!secret.constantTimeEquals(Self.bytes([1, 2, 3, 4, 0])))
    }

    @Test("hasPrefix", arguments: [([], true), ([9], true), ([9, 8], true), ([9, 8, 7], true), ([8], false),
                                   ([9, 7], false), ([9, 8, 7, 6], false)] as [([UInt8], Bool)])
    func hasPrefix(_ prefix: [UInt8], _ expected: Bool) {
        #expect(Self.bytes([9, 8, 7]).hasPrefix(Data(prefix)) == expected)
    }

    @Test("copying a slice, concatenating, and copying a passcode's UTF-8")
    func constructors() {
        let source = Self.bytes([1, 2, 3, 4, 5])
        #expect(Self.contents(SecureBytes(copying: source, offset: 1, count: 3)) == [2, 3, 4])
        #expect(Self.contents(SecureBytes(copying: source, offset: 3)) == [4, 5])
        #expect(Self.contents(SecureBytes(concatenating: [source, SecureBytes(count: 0), Self.bytes([6])])) == [1, 2, 3, 4, 5, 6])
        #expect(Self.contents(SecureBytes(copyingUTF8: "é1")) == [0xC3, 0xA9, 0x31])
        // A copy is independent of its source.
        let copy = SecureBytes(copying: source)
        source.wipe()
        #expect(Self.contents(copy) == [1, 2, 3, 4, 5])
    }

    @Test("a throwing initializer leaves nothing behind and rethrows")
    func throwingInitializer() {
        struct Failure: Error {}
        #expect(throws: Failure.self) {
            _ = try SecureBytes(count: 8) { buffer in
                buffer[0] = 0xFF
                throw Failure()
            }
        }
    }

    @Test("descriptions are redacted: no byte of the secret appears")
    func redacted() {
        let secret = Self.bytes([0xDE, 0xAD, 0xBE, 0xEF])
        for text in [secret.description, secret.debugDescription, "\(secret)", String(reflecting: secret)] {
            #expect(text.contains("redacted"))
            #expect(text.contains("4 bytes"))
            #expect(!text.lowercased().contains("deadbeef"))
            #expect(!text.contains("222"), "\(text)")   // 0xDE in decimal
        }
    }

    @Test("random buffers differ")
    func random() {
        #expect(!SecureBytes.random(count: 32).constantTimeEquals(SecureBytes.random(count: 32)))
        #expect(SecureBytes.random(count: 0).count == 0)
    }

    @Test("a part released while its allocation lives on (kept by another part) is zeroed at once")
    func releasedPartIsZeroed() {
        var parts: [SecureBytes]? = SecureBytes.allocatingTogether([64, 64])
        let kept = parts![1]
        parts![0].randomize()
        #expect(!parts![0].isZero)
        // Where the released part lies: still mapped, the allocation being kept by `kept`.
        let address = parts![0].withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        parts = nil
        let released = UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: address), count: 64)
        #expect(released.allSatisfy { $0 == 0 }, "a released part's bytes lingered in its allocation")
        withExtendedLifetime(kept) {}
    }

    @Test("buffers allocated together are independent: each wipes only itself and outlives the others")
    func allocatedTogether() {
        var parts: [SecureBytes]? = SecureBytes.allocatingTogether([32, 16, 32])
        let kept = parts![1]
        #expect(parts!.map(\.count) == [32, 16, 32])
        for part in parts! { part.randomize() }
        #expect(!parts!.contains { $0.isZero })
        parts![0].wipe()
        #expect(parts![0].isZero && !parts![1].isZero && !parts![2].isZero, "a wipe stays inside its part")
        let copy = SecureBytes(copying: kept)
        parts = nil  // the other parts go; the region lives on with `kept`
        #expect(kept.constantTimeEquals(copy))
        kept.randomize()
        #expect(!kept.constantTimeEquals(copy))
    }
}
