import Foundation
import Testing
@testable import DataProtection

/// Edits of the raw on-disk files: every read must end in `integrityFailure`
/// and never return bytes the file did not hold.
///
/// Where the format legitimately tolerates an edit (the older header slot, its
/// zero padding, slack inside the allocated records), the read may also return
/// the current content; a damaged newest slot may fall back to the older one,
/// which is an earlier committed state of the same file, never forged data.
@Suite struct TamperTests {
    static let sizes = [0, 1, 16_383, 16_384, 16_385, 3 * 16_384 + 100]
    static let chunkSize = 16_384
    static let stride = 16_384 + 40
    static let region = 1_024

    // MARK: - On-disk helpers

    /// On-disk entries of a directory (no metadata, no debris, no journals).
    static func entries(of directory: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0 != "dpdir" && !$0.hasPrefix(".") && !$0.hasSuffix(".j") }
            .map { directory.appendingPathComponent($0) }
    }

    static func isDirectory(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    /// Creates the store directory `name` (in the root) and returns its on-disk directory:
    /// the one directory that appears in the store's on-disk root.
    static func makeDirectory(_ name: String, in fixture: StoreFixture) throws -> URL {
        let before = Set(try entries(of: fixture.filesDirectory))
        try fixture.store.createDirectory(atPath: name)
        let new = Set(try entries(of: fixture.filesDirectory)).subtracting(before).filter(isDirectory)
        try #require(new.count == 1, "one new on-disk directory for \(name)")
        return new.first!
    }

    /// The only regular file in an on-disk directory.
    static func onlyFile(in directory: URL) throws -> URL {
        let files = try entries(of: directory).filter { !isDirectory($0) }
        try #require(files.count == 1)
        return files[0]
    }

    // MARK: - Subjects

    /// One protected file under attack, alone in its store directory.
    struct Subject {
        let path: String
        let disk: URL
        let size: Int
        /// Every committed state, oldest first; the last is current.
        let history: [Data]
        /// A second file of the same class and size.
        let twinPath: String
        let twinDisk: URL
        var current: Data { history.last! }
        var records: Int { (size + TamperTests.chunkSize - 1) / TamperTests.chunkSize }
        func recordOffset(_ index: Int) -> Int { TamperTests.region + index * TamperTests.stride }
        func recordLength(_ index: Int) -> Int { min(TamperTests.chunkSize, size - index * TamperTests.chunkSize) + 40 }
        var physicalSize: Int { records == 0 ? TamperTests.region : recordOffset(records - 1) + recordLength(records - 1) }
        var allowedSize: Int { TamperTests.region + records * TamperTests.stride }
    }

    /// Writes a file in the store root and returns its on-disk file: the one regular
    /// file that appears in the store's on-disk root.
    static func writeFile(_ data: Data, to path: String, _ protectionClass: ProtectionClass, in fixture: StoreFixture) throws -> URL {
        let before = Set(try entries(of: fixture.filesDirectory))
        try fixture.store.write(data, to: path, protection: ProtectionChoice(protectionClass))
        let new = Set(try entries(of: fixture.filesDirectory)).subtracting(before).filter { !isDirectory($0) }
        try #require(new.count == 1, "one new on-disk file for \(path)")
        return new.first!
    }

    /// A file written once (only header slot 0 valid), or edited afterwards through a
    /// handle (both slots valid, the older one describing an earlier state).
    /// In the store root: every read walks one component only, which keeps the sweep fast.
    static func makeSubject(_ fixture: StoreFixture, _ protectionClass: ProtectionClass, size: Int, edited: Bool) throws -> Subject {
        let store = fixture.store
        let name = "\(protectionClass.letter)-\(size)-\(edited ? "edited" : "fresh")"
        let first = patternBytes(size, seed: UInt64(size) &* 31 &+ (edited ? 7 : 0))
        let disk = try writeFile(first, to: name, protectionClass, in: fixture)
        let twinDisk = try writeFile(patternBytes(size, seed: UInt64(size) &+ 1_000), to: name + "-twin", protectionClass, in: fixture)
        var history = [first]
        if edited {
            if size > 0 {
                let handle = try store.openFile(atPath: name)
                var second = first
                second[0] ^= 0xFF
                try handle.write(contentsOf: second.prefix(1))
                try handle.close()
                history.append(second)
            } else {
                try store.setProtectionClass(protectionClass, ofItemAtPath: name)  // rewrites both slots
            }
        }
        #expect(try store.contents(atPath: name) == history.last!)
        return Subject(path: name, disk: disk, size: size, history: history, twinPath: name + "-twin", twinDisk: twinDisk)
    }

    // MARK: - Reading a tampered file

    enum Outcome: Equatable, CustomStringConvertible {
        case data(Data)
        case failure(DataProtectionError.Code)

        var description: String {
            switch self {
            case .data(let data): "\(data.count) bytes"
            case .failure(let code): code.rawValue
            }
        }
    }

    static func readWhole(_ store: ProtectedStore, _ path: String) -> Outcome {
        switch outcome({ try store.contents(atPath: path) }) {
        case .success(let data): .data(data)
        case .failure(let error): .failure(error.code)
        }
    }

    static func readThroughHandle(_ store: ProtectedStore, _ path: String) -> Outcome {
        switch outcome({ () throws -> Data in
            let handle = try store.openFile(atPath: path, mode: .read)
            defer { try? handle.close() }
            // Piecewise, so that every chunk is read on its own too.
            var data = Data()
            while true {
                let piece = try handle.read(upToCount: 10_000)
                if piece.isEmpty { break }
                data += piece
            }
            return data
        }) {
        case .success(let data): .data(data)
        case .failure(let error): .failure(error.code)
        }
    }

    /// What an edit may lead to.
    enum Expectation {
        /// `integrityFailure`, nothing else.
        case detected
        /// `integrityFailure` or the current content.
        case detectedOrCurrent
        /// `integrityFailure` or one of the file's committed states.
        case detectedOrCommitted
    }

    /// Collects violations for one subject, reported once.
    final class Findings {
        var violations: [String] = []
        var checks = 0
        /// Edits the format tolerated (the read returned the current content).
        var tolerated: [String] = []
    }

    static func check(
        _ fixture: StoreFixture, _ subject: Subject, _ what: String, _ expectation: Expectation, _ findings: Findings, handle: Bool = true
    ) {
        var outcomes = [("contents", readWhole(fixture.store, subject.path))]
        if handle { outcomes.append(("handle", readThroughHandle(fixture.store, subject.path))) }
        for (reader, outcome) in outcomes {
            findings.checks += 1
            let fine: Bool
            switch (outcome, expectation) {
            case (.failure(.integrityFailure), _):
                fine = true
            case (.data(let data), .detectedOrCurrent):
                fine = data == subject.current
                if fine { findings.tolerated.append("\(what) (\(reader))") }
            case (.data(let data), .detectedOrCommitted):
                fine = subject.history.contains(data)
            default:
                fine = false
            }
            if !fine {
                let got: String
                if case .data(let data) = outcome {
                    got = data == subject.current ? "the current content" : subject.history.contains(data) ? "an older state" : "FORGED \(data.count) bytes"
                } else {
                    got = outcome.description
                }
                findings.violations.append("\(what) via \(reader): got \(got), expected \(expectation)")
            }
        }
    }

    /// Writes `bytes` over the subject's file, runs the check, restores the original.
    static func withFileContent(_ subject: Subject, _ bytes: Data, _ body: () -> Void) throws {
        let original = try Data(contentsOf: subject.disk)
        try bytes.write(to: subject.disk)
        defer { try? original.write(to: subject.disk) }
        body()
    }

    static func patch(_ handle: FileHandle, at offset: Int, _ byte: UInt8) throws {
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: Data([byte]))
    }

    // MARK: - The sweep

    struct Case: Sendable, CustomTestStringConvertible {
        let protectionClass: ProtectionClass
        let edited: Bool
        var testDescription: String { "\(protectionClass.letter) \(edited ? "edited" : "fresh")" }
    }

    static let cases = ProtectionClass.allCases.flatMap { [Case(protectionClass: $0, edited: false), Case(protectionClass: $0, edited: true)] }

    @Test(arguments: cases)
    func everyEditIsDetected(_ testCase: Case) throws {
        try withStore { fixture in
            for size in Self.sizes {
                let subject = try Self.makeSubject(fixture, testCase.protectionClass, size: size, edited: testCase.edited)
                let findings = Findings()
                try Self.attack(fixture, subject, findings)
                // Restored: reads again.
                #expect(Self.readWhole(fixture.store, subject.path) == .data(subject.current))
                #expect(findings.violations.isEmpty,
                        "\(subject.path): \(findings.violations.count) of \(findings.checks) reads returned data: \(findings.violations.prefix(12).joined(separator: "; "))")
                #expect(findings.checks >= 2 * 50, "at least 50 edits, each read twice")
                if ProcessInfo.processInfo.environment["DP_TAMPER_VERBOSE"] != nil {
                    print("TOLERATED \(subject.path): \(findings.tolerated.filter { !$0.contains("header slot") })")
                }
            }
        }
    }

    static func attack(_ fixture: StoreFixture, _ subject: Subject, _ findings: Findings) throws {
        let original = try Data(contentsOf: subject.disk)
        try #require(original.count == subject.physicalSize, "the on-disk layout: \(original.count) bytes for \(subject.size)")
        let slots = (0..<2).map { FileHeader.parse(slot: original.subdata(in: $0 * 512..<($0 + 1) * 512)) }
        let newest = slots[1] != nil && (slots[0] == nil || slots[1]!.header.generation > slots[0]!.header.generation) ? 1 : 0
        let bothValid = slots[0] != nil && slots[1] != nil
        try #require(slots[newest] != nil)
        if subject.history.count > 1 || subject.size == 0 && bothValid {
            try #require(bothValid, "an edited file has two valid header slots")
        }

        // Bit flips, restored one by one.
        let handle = try FileHandle(forUpdating: subject.disk)
        defer { try? handle.close() }
        func flip(_ offset: Int, _ what: String, _ expectation: Expectation, handle readThroughHandle: Bool = true) throws {
            let byte = original[offset]
            try patch(handle, at: offset, byte ^ UInt8(1 << (offset % 8)))
            check(fixture, subject, "\(what) @\(offset)", expectation, findings, handle: readThroughHandle)
            try patch(handle, at: offset, byte)
        }
        // Every byte of both slots' fields and MAC for one size; the first and last byte of
        // every field for the others (the header does not depend on the size).
        let fieldBounds = [0, 3, 4, 5, 6, 7, 8, 23, 24, 31, 32, 39, 40, 47, 48, 55, 56, 87, 88, 111, 112, 159, 160, 175, 191]
        let sweep = subject.size == 16_385
        for slot in 0..<2 {
            for byte in sweep ? Array(0..<192) : fieldBounds {
                let offset = slot * 512 + byte
                let expectation: Expectation
                if slot == newest {
                    // A damaged newest slot may fall back to the older, valid one (a committed state).
                    expectation = bothValid ? .detectedOrCommitted : .detected
                } else {
                    expectation = .detectedOrCurrent  // not an attack on the current state
                }
                // Header damage is found when the file is opened, the same way for both readers:
                // in the full sweep, the handle reads every 8th byte only.
                try flip(offset, "header slot \(slot) byte \(byte)", expectation, handle: !sweep || byte % 8 == 0)
            }
            for byte in [192, 300, 511] {
                try flip(slot * 512 + byte, "header slot \(slot) padding", .detectedOrCurrent)
            }
        }
        var generator = SeededGenerator(seed: UInt64(subject.size) &+ 99)
        var chunkFlips = 0
        for index in 0..<subject.records {
            let start = subject.recordOffset(index)
            let length = subject.recordLength(index)
            // Nonce, ciphertext (first, last, random), tag.
            var positions: Set<Int> = [0, 12, 23, 24, length - 17, length - 16, length - 1]
            if length <= 41 {
                positions = Set(0..<length)  // a one-byte chunk: every byte
            } else {
                while positions.count < 9 { positions.insert(Int.random(in: 24..<length - 16, using: &generator)) }
            }
            for position in positions.sorted() {
                let part = position < 24 ? "nonce" : position >= length - 16 ? "tag" : "ciphertext"
                try flip(start + position, "record \(index) \(part)", .detected)
                chunkFlips += 1
            }
        }
        #expect(subject.records == 0 || chunkFlips >= 9, "\(chunkFlips) chunk flips")

        // Truncation: inside the header region, at each record boundary, one byte into each record, one byte short.
        var cuts: Set<Int> = [0, 1, 511, 512, 1_023, original.count - 1]
        for index in 0..<subject.records {
            cuts.insert(subject.recordOffset(index))
            cuts.insert(subject.recordOffset(index) + 1)
        }
        for cut in cuts.sorted() where cut >= 0 && cut < original.count {
            try withFileContent(subject, original.prefix(cut)) {
                check(fixture, subject, "truncated to \(cut)", .detected, findings)
            }
        }

        // Extension: one byte, a whole stride of zeros, a valid-looking record copied from the file or its twin.
        let twin = try Data(contentsOf: subject.twinDisk)
        var extensions: [(String, Data)] = [("1 zero byte", Data(count: 1)), ("1 byte", Data([0xA5])), ("a stride of zeros", Data(count: stride))]
        if subject.records > 0 {
            let firstRecord = original.subdata(in: subject.recordOffset(0)..<subject.recordOffset(0) + subject.recordLength(0))
            extensions.append(("a copy of record 0", firstRecord))
            extensions.append(("a copy of record 0 padded to a stride", firstRecord + Data(count: stride - firstRecord.count)))
            extensions.append(("the twin's last record", twin.suffix(subject.recordLength(subject.records - 1))))
        }
        for (what, tail) in extensions {
            let grown = original + tail
            // Bytes inside the allocated records are never read: harmless, but not always detected.
            let expectation: Expectation = grown.count > subject.allowedSize ? .detected : .detectedOrCurrent
            try withFileContent(subject, grown) {
                check(fixture, subject, "extended by \(what)", expectation, findings)
            }
        }

        // Records: swapped, copied from the twin at the same index, zeroed.
        let full = (0..<subject.records).filter { subject.recordLength($0) == stride }
        for pair in zip(full, full.dropFirst()) {
            var swapped = original
            let a = subject.recordOffset(pair.0), b = subject.recordOffset(pair.1)
            swapped.replaceSubrange(a..<a + stride, with: original.subdata(in: b..<b + stride))
            swapped.replaceSubrange(b..<b + stride, with: original.subdata(in: a..<a + stride))
            try withFileContent(subject, swapped) {
                check(fixture, subject, "records \(pair.0) and \(pair.1) swapped", .detected, findings)
            }
        }
        for index in 0..<subject.records {
            let range = subject.recordOffset(index)..<subject.recordOffset(index) + subject.recordLength(index)
            var copied = original
            copied.replaceSubrange(range, with: twin.subdata(in: range))
            try withFileContent(subject, copied) {
                check(fixture, subject, "record \(index) from the twin", .detected, findings)
            }
            var zeroed = original
            zeroed.replaceSubrange(range, with: Data(count: range.count))
            try withFileContent(subject, zeroed) {
                check(fixture, subject, "record \(index) zeroed", .detected, findings)
            }
        }

        // Headers: the twin's header region (same class), one slot of the twin's, all zeros.
        var borrowed = original
        borrowed.replaceSubrange(0..<region, with: twin.prefix(region))
        try withFileContent(subject, borrowed) {
            // An empty file is exactly its header: the twin's header makes it the (equally empty) twin.
            check(fixture, subject, "header region from the twin", subject.size == 0 ? .detectedOrCurrent : .detected, findings)
        }
        var mixed = original
        mixed.replaceSubrange(newest * 512..<(newest + 1) * 512, with: twin.prefix(512))
        try withFileContent(subject, mixed) {
            check(fixture, subject, "newest slot from the twin", subject.size == 0 ? .detectedOrCommitted : bothValid ? .detectedOrCommitted : .detected,
                  findings)
        }
        var blank = original
        blank.replaceSubrange(0..<region, with: Data(count: region))
        try withFileContent(subject, blank) {
            check(fixture, subject, "header region zeroed", .detected, findings)
        }
        var oneSlot = original
        oneSlot.replaceSubrange(newest * 512..<(newest + 1) * 512, with: Data(count: 512))
        try withFileContent(subject, oneSlot) {
            check(fixture, subject, "newest slot zeroed", bothValid ? .detectedOrCommitted : .detected, findings)
        }
        // The whole file replaced by the twin's: a different, valid file of the same class.
        try withFileContent(subject, twin) {
            findings.checks += 1
            if case .data(let data) = readWhole(fixture.store, subject.path), data != subject.current, subject.size > 0 {
                // Reported, not failed: a whole valid file swapped in is a different file, which
                // the format cannot tell from the original without a store-level binding.
                findings.tolerated.append("whole file replaced by the twin: reads as the twin")
            }
        }
    }

    // MARK: - Journal

    @Test(arguments: ProtectionClass.allCases)
    func garbageJournalIsIgnored(_ protectionClass: ProtectionClass) throws {
        try withStore { fixture in
            let store = fixture.store
            let data = patternBytes(40_000, seed: 1)
            let disk = try Self.makeDirectory("d", in: fixture)
            try store.write(data, to: "d/f", protection: ProtectionChoice(protectionClass))
            try store.write(patternBytes(40_000, seed: 2), to: "twin", protection: ProtectionChoice(protectionClass))
            let file = try Self.onlyFile(in: disk)
            let journal = URL(fileURLWithPath: file.path + ".j")
            let garbage: [(String, Data)] = [
                ("empty", Data()), ("short", Data([1, 2, 3])), ("random", patternBytes(5_000, seed: 3)),
                ("magic then garbage", Data("DPFJ".utf8) + Data([1]) + patternBytes(200, seed: 4)),
                ("a copy of the file", try Data(contentsOf: file)),
            ]
            for (what, bytes) in garbage {
                try bytes.write(to: journal)
                #expect(try store.contents(atPath: "d/f") == data, "\(what)")
                #expect(!FileManager.default.fileExists(atPath: journal.path), "\(what): the journal is removed")
                try bytes.write(to: journal)
                let handle = try store.openFile(atPath: "d/f", mode: .read)
                #expect(try handle.readToEnd() == data, "\(what)")
                try handle.close()
            }
            #expect(try store.contentsOfDirectory(atPath: "d") == ["f"])
        }
    }

    // MARK: - Names and directories

    @Test func entryMovedToAnotherDirectoryOnDisk() throws {
        try withStore { fixture in
            let store = fixture.store
            let one = try Self.makeDirectory("one", in: fixture)
            let two = try Self.makeDirectory("two", in: fixture)
            try store.write(Data("a".utf8), to: "one/a")
            try store.write(Data("b".utf8), to: "two/b")
            let moved = try Self.onlyFile(in: one)
            try FileManager.default.moveItem(at: moved, to: two.appendingPathComponent(moved.lastPathComponent))
            expectStoreError(.integrityFailure) { _ = try store.contentsOfDirectory(atPath: "two") }
            #expect(try store.contentsOfDirectory(atPath: "one") == [])
            expectStoreError(.fileNotFound) { _ = try store.contents(atPath: "two/a") }
            // Into the root.
            try FileManager.default.moveItem(at: two.appendingPathComponent(moved.lastPathComponent),
                                             to: fixture.filesDirectory.appendingPathComponent(moved.lastPathComponent))
            expectStoreError(.integrityFailure) { _ = try store.contentsOfDirectory(atPath: "/") }
            #expect(try store.contentsOfDirectory(atPath: "two") == ["b"])
        }
    }

    @Test(arguments: ["AAAA", "garbage-name", "a", String(repeating: "A", count: 76), String(repeating: "_", count: 60)])
    func garbageEntryName(_ name: String) throws {
        try withStore { fixture in
            let store = fixture.store
            let disk = try Self.makeDirectory("d", in: fixture)
            try store.write(Data("x".utf8), to: "d/f")
            try Data("planted".utf8).write(to: disk.appendingPathComponent(name))
            expectStoreError(.integrityFailure) { _ = try store.contentsOfDirectory(atPath: "d") }
            try FileManager.default.createDirectory(at: fixture.filesDirectory.appendingPathComponent(name), withIntermediateDirectories: false)
            expectStoreError(.integrityFailure) { _ = try store.contentsOfDirectory(atPath: "/") }
            // The named entries still work.
            #expect(try store.contents(atPath: "d/f") == Data("x".utf8))
        }
    }

    /// A real entry name from another directory of the same store does not decrypt here either.
    @Test func entryNameFromAnotherDirectory() throws {
        try withStore { fixture in
            let store = fixture.store
            let one = try Self.makeDirectory("one", in: fixture)
            let two = try Self.makeDirectory("two", in: fixture)
            try store.write(Data("a".utf8), to: "one/same")
            let name = try Self.onlyFile(in: one).lastPathComponent
            try Data("planted".utf8).write(to: two.appendingPathComponent(name))
            expectStoreError(.integrityFailure) { _ = try store.contentsOfDirectory(atPath: "two") }
        }
    }

    @Test func tamperedDirectoryMetadata() throws {
        try withStore { fixture in
            let store = fixture.store
            let disk = try Self.makeDirectory("d", in: fixture)
            try store.write(Data("x".utf8), to: "d/f")
            let metadata = disk.appendingPathComponent("dpdir")
            let original = try Data(contentsOf: metadata)
            for offset in Swift.stride(from: 0, to: original.count, by: 3) {
                var bytes = original
                bytes[offset] ^= 0x10
                try bytes.write(to: metadata)
                try fixture.device.reboot()  // the store caches directory metadata until restart
                try fixture.unlock()
                expectStoreError(.integrityFailure, "dpdir byte \(offset)") { _ = try store.contentsOfDirectory(atPath: "d") }
                expectStoreError(.integrityFailure, "dpdir byte \(offset)") { _ = try store.contents(atPath: "d/f") }
            }
            try original.write(to: metadata)
            try fixture.device.reboot()
            try fixture.unlock()
            #expect(try store.contents(atPath: "d/f") == Data("x".utf8))
            try FileManager.default.removeItem(at: metadata)
            try fixture.device.reboot()
            try fixture.unlock()
            expectStoreError(.integrityFailure) { _ = try store.contentsOfDirectory(atPath: "d") }
        }
    }
}
