import Foundation
import SodiumBridge
import SystemPackage
import Testing
@testable import DataProtection

/// Key hygiene: once a class key is discarded (class A and the class B secret after
/// the grace period of a lock; class C at reboot), no byte sequence of that key, of
/// any per-file key of that class (file key, chunk key, header key), or of plaintext
/// that went through handles and whole-file calls of that class is left anywhere in
/// the process's readable memory.
///
/// The library records every class key and per-file key it creates through the
/// test-only ``SecretRecorder`` (masked, so the record is never itself a match);
/// the test records 32-byte windows of the plaintext it writes, then wipes its own
/// buffers, and the plaintext handed back by reads (the caller's copy, which the
/// claim does not cover) is wiped by the test once checked. ``MemoryScanner`` then
/// reads every readable mapping through `/proc/self/mem`. A scan before the discard
/// is the positive control: it must find the live keys.
@Suite("Key hygiene: memory scan", .serialized, .enabled(if: !underSanitizer, "the sanitizers' shadow memory is terabytes of readable reservations"))
struct KeyHygieneTests {
    /// A 32-byte window of the plaintext every 4 KiB, recorded masked.
    static func recordWindows(of plaintext: Data, label: String) -> [SecretRecorder.Secret] {
        // From byte 512 on: a freed heap block begins with the allocator's list pointers.
        stride(from: 512, to: plaintext.count - 32, by: 4096).map { offset in
            plaintext.withUnsafeBytes { raw in
                SecretRecorder.Secret(label: "\(label) plaintext @\(offset)",
                                      bytes: UnsafeRawBufferPointer(rebasing: raw[offset..<offset + 32]))
            }
        }
    }

    /// Writes and reads files of `protection` through every path (whole-file write and
    /// read, streaming read, a handle written in pieces, read back and left open), wiping
    /// the test's own copies; returns the plaintext windows and the open handle.
    static func exercise(_ store: ProtectedStore, protection: ProtectionClass) async throws
        -> (windows: [SecretRecorder.Secret], handle: ProtectedFileHandle) {
        var windows: [SecretRecorder.Secret] = []
        var whole = Random.bytes(count: 96 * 1024)
        windows += recordWindows(of: whole, label: "whole-file")
        let wholeHash = Self.digest(whole)
        try await store.write(whole, to: "Documents/whole.bin", protection: ProtectionChoice(protection))
        try await store.write(whole[1000...], to: "Documents/slice.bin", protection: ProtectionChoice(protection))
        Memory.wipe(&whole)

        var back = try await store.contents(atPath: "Documents/whole.bin")
        #expect(Self.digest(back) == wholeHash)
        Memory.wipe(&back)
        for try await piece in store.chunks(atPath: "Documents/whole.bin", chunkSize: 8192) {
            var piece = piece
            Memory.wipe(&piece)
        }

        let handle = try store.openFile(atPath: "Documents/handle.bin", create: true, protection: ProtectionChoice(protection))
        var pieces = Random.bytes(count: 64 * 1024)
        windows += recordWindows(of: pieces, label: "handle")
        let piecesHash = Self.digest(pieces)
        // Pieces as slices of the test's buffer (indices not from 0), as [UInt8], and as Data.
        for (number, offset) in stride(from: 0, to: pieces.count, by: 5000).enumerated() {
            let range = offset..<min(offset + 5000, pieces.count)
            switch number % 3 {
            case 0:
                try handle.write(contentsOf: pieces[range])
            case 1:
                var array = [UInt8](pieces[range])
                try handle.write(contentsOf: array)
                for index in array.indices { array[index] = 0 }
            default:
                var piece = pieces.subdata(in: range)
                try handle.write(contentsOf: piece)
                Memory.wipe(&piece)
            }
        }
        Memory.wipe(&pieces)
        try handle.synchronize()
        var readBack = try handle.read(atOffset: 0, upToCount: 64 * 1024)
        #expect(Self.digest(readBack) == piecesHash)
        Memory.wipe(&readBack)
        var part = try handle.read(atOffset: 10_000, upToCount: 3000)
        Memory.wipe(&part)
        // Overwrites inside existing chunks (read-modify-write through the journal), a truncation.
        for offset in [100, 20_000, 40_000] {
            var patch = Random.bytes(count: 2048)
            windows += recordWindows(of: patch, label: "overwrite")
            try handle.write(contentsOf: patch, atOffset: UInt64(offset))
            Memory.wipe(&patch)
            var echo = try handle.read(atOffset: UInt64(offset), upToCount: 2048)  // from the handle's chunk cache
            Memory.wipe(&echo)
        }
        try handle.synchronize()
        try handle.truncate(atOffset: 50_000)
        try handle.synchronize()
        var tail = try handle.read(atOffset: 30_000, upToCount: 30_000)
        Memory.wipe(&tail)
        // Copy and positional async reads of the whole file.
        try store.copyItem(atPath: "Documents/whole.bin", toPath: "Documents/copy.bin")
        let reader = try store.openFile(atPath: "Documents/copy.bin", mode: .read)
        var block = try await reader.readData(atOffset: 4096, upToCount: 4096)
        Memory.wipe(&block)
        try reader.close()
        return (windows, handle)
    }

    /// A digest of plaintext computed in secure memory (hashing it as public `.data` would
    /// leave a copy of the message behind, which the scan would rightly find).
    static func digest(_ data: Data) -> Data {
        let copy = SecureBytes(count: data.count) { $0.copyBytes(from: data) }
        defer { copy.wipe() }
        return BLAKE2b.hash([.secret(copy)])
    }

    static func scan(_ secrets: [SecretRecorder.Secret]) throws -> MemoryScanner.Report {
        let report = try MemoryScanner.scan(for: secrets)
        print("key hygiene: \(secrets.count) secrets searched in \(report.regionsScanned) mappings, "
              + "\(report.bytesScanned) bytes scanned, \(report.bytesSkipped) skipped, \(report.findings.count) found: "
              + Set(report.findings.map(\.label)).sorted().joined(separator: ", "))
        return report
    }

    static let classAKeys: Set<String> = ["class key complete", "class key completeUnlessOpenSecret"]
    static let fileKeys: Set<String> = ["file key", "file chunk key", "file header key"]

    @Test("complete: after the grace period no class A/B-secret key, complete file key or complete plaintext is left in memory")
    func completeAfterGrace() async throws {
        #if os(Linux)
        try await withScratchDirectory { root in
            let clock = VirtualClock()
            let store = try ProtectedStore(directory: root, clock: clock, configuration: .testing(grace: .seconds(10)))
            let (secrets, handle) = try await SecretRecorder.recording { () async throws -> ([SecretRecorder.Secret], ProtectedFileHandle) in
                try await store.device.unlock()
                try await store.device.setPasscode("1234")
                let (windows, handle) = try await Self.exercise(store, protection: .complete)
                let keys = SecretRecorder.recorded.filter { Self.classAKeys.contains($0.label) || Self.fileKeys.contains($0.label) }
                return (keys + windows, handle)
            }
            #expect(secrets.contains { $0.label == "class key complete" })
            #expect(secrets.filter { $0.label == "file key" }.count >= 2)

            // Positive control: live keys are found.
            let before = try Self.scan(secrets)
            #expect(before.findings.contains { $0.label == "class key complete" })
            #expect(before.findings.contains { $0.label == "file chunk key" })

            try store.device.lock()
            clock.advance(by: .seconds(11))
            #expect(!store.device.isProtectedDataAvailable)
            let after = try Self.scan(secrets)
            #expect(after.bytesScanned > 1 << 20)
            #expect(after.findings.isEmpty, "left in memory: \(after.findings)")
            try? handle.close()
        }
        #endif
    }

    /// A value with secret bytes, for the Codable paths.
    struct Secret: Codable {
        var payload: Data
        var tag: Int
    }

    /// Zeroes a `String`'s UTF-8 storage where it is (a careful caller's copy of a line; lines
    /// here are long enough to be stored on the heap, not inline).
    static func wipe(_ string: inout String) {
        string.withUTF8 { buffer in
            if let base = buffer.baseAddress {
                UnsafeMutableRawPointer(mutating: base).initializeMemory(as: UInt8.self, repeating: 0, count: buffer.count)
            }
        }
    }

    @Test("complete: Codable files (JSON, property list) and lines(atPath:) leave no plaintext after the grace period")
    func codableAndLines() async throws {
        #if os(Linux)
        try await withScratchDirectory { root in
            let clock = VirtualClock()
            let store = try ProtectedStore(directory: root, clock: clock, configuration: .testing(grace: .seconds(10)))
            let secrets = try await SecretRecorder.recording { () async throws -> [SecretRecorder.Secret] in
                try await store.device.unlock()
                try await store.device.setPasscode("1234")
                var windows: [SecretRecorder.Secret] = []
                // 400 lines of 100 printable characters, read back line by line.
                let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
                // Filled in place: a Data grown byte by byte leaves copies of itself behind.
                var text = Data(repeating: UInt8(ascii: "\n"), count: 400 * 101)
                var random = Random.bytes(count: 400 * 100)
                for (index, byte) in random.enumerated() {
                    text[index / 100 * 101 + index % 100] = alphabet[Int(byte) % alphabet.count]
                }
                Memory.wipe(&random)
                windows += Self.recordWindows(of: text, label: "lines")
                try await store.write(text, to: "Documents/lines.txt", protection: .complete)
                Memory.wipe(&text)
                var count = 0
                for try await line in store.lines(atPath: "Documents/lines.txt") {
                    var line = line
                    #expect(line.utf8.count == 100)
                    Self.wipe(&line)
                    count += 1
                }
                #expect(count == 400)
                // Codable: the payload's bytes are raw in a binary property list, base64 in JSON.
                for (format, name) in [(ProtectedCodingFormat.propertyList, "value.plist"), (.json, "value.json")] {
                    var value = Secret(payload: Random.bytes(count: 16 * 1024), tag: 7)
                    windows += Self.recordWindows(of: value.payload, label: "codable \(name)")
                    try store.encode(value, to: "Documents/\(name)", format: format, protection: .complete)
                    var back = try store.decode(Secret.self, from: "Documents/\(name)", format: format)
                    #expect(Self.digest(back.payload) == Self.digest(value.payload))
                    Memory.wipe(&back.payload)
                    Memory.wipe(&value.payload)
                }
                return windows
            }
            try store.device.lock()
            clock.advance(by: .seconds(11))
            let after = try Self.scan(secrets)
            #expect(after.bytesScanned > 1 << 20)
            #expect(after.findings.isEmpty, "left in memory: \(Set(after.findings.map(\.label)).sorted()) \(after.findings.prefix(8))")
        }
        #endif
    }

    @Test("a passcode read from a file lives only in secure memory: found while held, nowhere once released")
    func passcodeFromFile() throws {
        #if os(Linux)
        try withScratchDirectory { (root: URL) throws in
            let store = try ProtectedStore(directory: root, clock: VirtualClock(), configuration: .testing())
            // 40 bytes, none of them NUL or a newline, not UTF-8: a key file, say.
            var raw = Data((0..<40).map { UInt8(0x80 + (($0 * 37) % 0x7F)) })
            let secret = raw.withUnsafeBytes { SecretRecorder.Secret(label: "passcode", bytes: $0) }
            let file = root.appendingPathComponent("passcode")
            try raw.write(to: file)
            Memory.wipe(&raw)
            func session() throws {
                let descriptor = try FileDescriptor.open(FilePath(file.path), .readOnly)
                defer { try? descriptor.close() }
                let passcode = try Passcode(reading: descriptor)
                #expect(passcode.byteCount == 40)
                try store.device.unlock()
                try store.device.setPasscode(passcode)
                try store.device.lock()
                try store.device.unlock(passcode: passcode)
                try store.device.changePasscode(from: passcode, to: passcode)
                // Positive control: the live passcode is found (in its secure memory).
                #expect(try Self.scan([secret]).findings.contains { $0.label == "passcode" })
            }
            try session()
            let after = try Self.scan([secret])
            #expect(after.findings.isEmpty, "left in memory: \(after.findings)")
        }
        #endif
    }

    @Test("completeUntilFirstUserAuthentication: after reboot no class C key, C file key or C plaintext is left in memory")
    func classCAfterReboot() async throws {
        #if os(Linux)
        try await withScratchDirectory { root in
            let store = try ProtectedStore(directory: root, clock: VirtualClock(), configuration: .testing())
            let secrets = try await SecretRecorder.recording { () async throws -> [SecretRecorder.Secret] in
                try await store.device.unlock()
                try await store.device.setPasscode("1234")
                let (windows, _) = try await Self.exercise(store, protection: .completeUntilFirstUserAuthentication)
                let keys = SecretRecorder.recorded.filter {
                    $0.label == "class key completeUntilFirstUserAuthentication" || Self.fileKeys.contains($0.label)
                }
                return keys + windows
            }
            let before = try Self.scan(secrets)
            #expect(before.findings.contains { $0.label == "class key completeUntilFirstUserAuthentication" })

            try store.device.reboot()
            let after = try Self.scan(secrets)
            #expect(after.findings.isEmpty, "left in memory: \(after.findings)")
        }
        #endif
    }
}
