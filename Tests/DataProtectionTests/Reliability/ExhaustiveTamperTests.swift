import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// Exhaustive tampering, SQLite's malformed-input style: every single bit of every
/// on-disk byte of a small protected file of each class, of its encrypted name, of
/// the directory metadata and of every device file, flipped in turn.
///
/// A protected file must never read as bytes it did not hold: each read fails with
/// `integrityFailure` (`fileNotFound` for a destroyed name), or returns exactly the
/// current content (a flip in the unauthenticated slot padding, or in the older
/// header slot, which is not what the file is read from). A device file flip is
/// a clear error at boot or, for the attempt counter, the punitive count: never a
/// crash, never a reset of the count. (The sampled sweep over sizes, truncation,
/// swaps and foreign headers is `TamperTests`; this one is exhaustive on small files.)
@Suite("Exhaustive bit flips")
struct ExhaustiveTamperTests {
    /// Counts for one sweep, printed for the README's figures.
    struct Tally: CustomStringConvertible {
        var flips = 0
        var detected = 0
        /// Read back as exactly the current content (a byte the format does not use).
        var identical = 0
        var violations: [String] = []
        var description: String { "\(flips) bit flips: \(detected) detected, \(identical) read back identical, \(violations.count) forged" }
    }

    /// The on-disk entry that `body` adds to `directory`.
    static func newEntry(in directory: URL, _ body: () throws -> Void) throws -> URL {
        let before = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
        try body()
        let added = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path)).subtracting(before)
            .filter { !$0.hasPrefix(".") }
        try #require(added.count == 1)
        return directory.appendingPathComponent(added.first!)
    }

    @Test("every bit of a small file of each class", arguments: ProtectionClass.allCases)
    func everyBitOfAFile(_ protectionClass: ProtectionClass) throws {
        try withStore { fixture in
            let store = fixture.store
            let content = patternBytes(100, seed: 11)
            let disk = try Self.newEntry(in: fixture.filesDirectory) {
                try store.write(content, to: "/f", protection: ProtectionChoice(protectionClass))
            }
            let original = try Data(contentsOf: disk)
            let handle = try FileHandle(forUpdating: disk)
            defer { try? handle.close() }
            var tally = Tally()
            for offset in 0..<original.count {
                for bit in 0..<8 {
                    try handle.seek(toOffset: UInt64(offset))
                    try handle.write(contentsOf: Data([original[offset] ^ UInt8(1 << bit)]))
                    tally.flips += 1
                    switch outcome({ try store.contents(atPath: "/f") }) {
                    case .failure(let error) where error.code == .integrityFailure:
                        tally.detected += 1
                    case .success(let data) where data == content:
                        tally.identical += 1
                    case let other:
                        tally.violations.append("byte \(offset) bit \(bit): \(other)")
                    }
                }
                try handle.seek(toOffset: UInt64(offset))
                try handle.write(contentsOf: Data([original[offset]]))
            }
            print("EXHAUSTIVE \(protectionClass.letter) file (\(original.count) bytes on disk): \(tally)")
            #expect(tally.violations.isEmpty, "\(tally.violations.prefix(10))")
            #expect(tally.flips == original.count * 8)
            // Exactly what the format does not read comes back identical: slot 0's padding
            // (bytes 192-511) and the unused slot 1 (512 zero bytes, which never parse);
            // every bit of slot 0's fields and MAC and of the record is detected.
            #expect(tally.identical == ((512 - 192) + 512) * 8)
            #expect(tally.detected == (192 + original.count - 1_024) * 8)
            #expect(try store.contents(atPath: "/f") == content, "restored")
        }
    }

    @Test("every bit of an encrypted name: fileNotFound by path, integrityFailure in the listing")
    func everyBitOfAName() throws {
        try withStore { fixture in
            let store = fixture.store
            let disk = try Self.newEntry(in: fixture.filesDirectory) { try store.write(Data("named".utf8), to: "/name") }
            let name = Array(disk.lastPathComponent.utf8)
            var tally = Tally()
            for index in name.indices {
                for bit in 0..<8 {
                    var flipped = name
                    flipped[index] ^= UInt8(1 << bit)
                    // Only names a file system accepts and that stay entries (not hidden, not a journal).
                    guard flipped[index] >= 0x21, flipped[index] < 0x7F, flipped[index] != UInt8(ascii: "/"),
                          flipped.first != UInt8(ascii: ".") else { continue }
                    let target = fixture.filesDirectory.appendingPathComponent(String(decoding: flipped, as: UTF8.self))
                    guard ProtectedStore.isEntryName(target.lastPathComponent) else { continue }
                    try FileManager.default.moveItem(at: disk, to: target)
                    tally.flips += 1
                    let read = outcome { try store.contents(atPath: "/name") }
                    let listed = outcome { try store.contentsOfDirectory(atPath: "/") }
                    if read.errorCode == .fileNotFound && listed.errorCode == .integrityFailure {
                        tally.detected += 1
                    } else {
                        tally.violations.append("char \(index) bit \(bit): read \(read), listing \(listed)")
                    }
                    try FileManager.default.moveItem(at: target, to: disk)
                }
            }
            print("EXHAUSTIVE encrypted name (\(name.count) characters): \(tally)")
            #expect(tally.violations.isEmpty, "\(tally.violations.prefix(10))")
            #expect(tally.flips >= name.count * 4)
        }
    }

    @Test("every bit of a directory's metadata (dpdir): integrityFailure, never a wrong directory")
    func everyBitOfMetadata() throws {
        try withStore { fixture in
            try fixture.store.write(Data("x".utf8), to: "/dir/f")
            let dpdir = fixture.filesDirectory.appendingPathComponent(DirectoryMetadata.fileName)
            let original = try Data(contentsOf: dpdir)
            var tally = Tally()
            for offset in 0..<original.count {
                for bit in 0..<8 {
                    var bytes = original
                    bytes[offset] ^= UInt8(1 << bit)
                    try bytes.write(to: dpdir)
                    tally.flips += 1
                    // A fresh instance: the metadata cache is per store.
                    let store = try ProtectedStore(directory: fixture.filesDirectory, device: fixture.device)
                    let listed = outcome { try store.contentsOfDirectory(atPath: "/") }
                    let read = outcome { try store.contents(atPath: "/dir/f") }
                    if listed.errorCode == .integrityFailure && read.errorCode == .integrityFailure {
                        tally.detected += 1
                    } else {
                        tally.violations.append("byte \(offset) bit \(bit): listing \(listed), read \(read)")
                    }
                }
            }
            try original.write(to: dpdir)
            print("EXHAUSTIVE dpdir (\(original.count) bytes): \(tally)")
            #expect(tally.violations.isEmpty, "\(tally.violations.prefix(10))")
        }
    }

    @Test("device files swapped in from another device: integrityFailure, the count never reset",
          arguments: [["keybag"], ["keybag", "effaceable"], ["keybag", "effaceable", "attempts"], ["uid", "keybag"]])
    func filesFromAnotherDevice(_ names: [String]) throws {
        try withScratchDirectory { root in
            let other = try DeviceFixture(root: root.appendingPathComponent("other"), configuration: .testing(), passcode: "1234")
            let fixture = try DeviceFixture(root: root.appendingPathComponent("mine"), configuration: .testing(), passcode: "1234")
            try fixture.device.lock()
            fixture.fail(2)
            for name in names {
                try FileManager.default.removeItem(at: fixture.file(name))
                try FileManager.default.copyItem(at: other.file(name), to: fixture.file(name))
            }
            fixture.device.relinquishOwnership()
            let booted = outcome { try Device(directory: fixture.directory, clock: fixture.clock, configuration: .testing()) }
            #expect(booted.errorCode == .integrityFailure, "\(names): \(booted)")
        }
    }

    @Test("every bit and every truncation of each device file: a clear error, never a crash, never a reset count",
          arguments: ["keybag", "effaceable", "uid", "attempts"])
    func everyBitOfDeviceFiles(_ name: String) throws {
        try withScratchDirectory { root in
            let fixture = try DeviceFixture(root: root, configuration: .testing(), passcode: "1234")
            try fixture.device.lock()
            fixture.fail(2)
            fixture.device.relinquishOwnership()
            let url = fixture.file(name)
            let original = try Data(contentsOf: url)
            var tally = Tally()
            var punitive = 0
            var emptySlotWiped = 0
            // The effaceable file has two slots; the one the keybag is not sealed under is empty
            // (zeros). A flip there is junk from an interrupted rotation, to the boot: it wipes it.
            let emptySlot: Range<Int>? = try name == "effaceable"
                ? fixture.device.files.readEffaceableSlots().flatMap { slots in slots.firstIndex { $0 == nil } }
                    .map { 5 + 32 * $0..<5 + 32 * $0 + 32 }
                : nil
            func boot(_ what: String, offset: Int? = nil) throws {
                tally.flips += 1
                switch outcome({ try Device(directory: fixture.directory, clock: fixture.clock, configuration: .testing()) }) {
                case .failure(let error) where error.code == .integrityFailure:
                    tally.detected += 1
                case .success(let device) where offset.map { emptySlot?.contains($0) == true } == true:
                    if device.failedPasscodeAttempts == 2, try fixture.device.files.readEffaceableSlots()?.compactMap({ $0 }).count == 1 {
                        emptySlotWiped += 1
                    } else {
                        tally.violations.append("\(what): a flip in the empty slot was not wiped")
                    }
                case .success(let device) where name == "attempts":
                    // A damaged counter boots with the punitive count, never fewer failures.
                    if device.failedPasscodeAttempts >= 9 { punitive += 1 } else {
                        tally.violations.append("\(what): booted with \(device.failedPasscodeAttempts) failures")
                    }
                case let other:
                    tally.violations.append("\(what): \(other)")
                }
            }
            for offset in 0..<original.count {
                for bit in 0..<8 {
                    var bytes = original
                    bytes[offset] ^= UInt8(1 << bit)
                    try bytes.write(to: url)
                    try boot("byte \(offset) bit \(bit)", offset: offset)
                }
            }
            for length in 0..<original.count {
                try original.prefix(length).write(to: url)
                try boot("truncated to \(length)")
            }
            try original.write(to: url)
            let device = try Device(directory: fixture.directory, clock: fixture.clock, configuration: .testing())
            #expect(device.failedPasscodeAttempts == 2, "restored")
            print("EXHAUSTIVE device file \(name) (\(original.count) bytes, flips and truncations): \(tally), \(punitive) punitive counts, \(emptySlotWiped) flips of the empty effaceable slot wiped")
            #expect(emptySlotWiped == (emptySlot == nil ? 0 : 256))
            #expect(tally.violations.isEmpty, "\(tally.violations.prefix(10))")
        }
    }
}
