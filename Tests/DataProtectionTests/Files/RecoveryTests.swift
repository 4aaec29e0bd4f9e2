import Foundation
import Testing
@testable import DataProtection

@Suite("Store recovery and hostile metadata")
struct RecoveryTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dp-recovery-\(UUID())")

    func makeStore() throws -> ProtectedStore {
        let store = try ProtectedStore(directory: directory, clock: VirtualClock(),
                                       configuration: DeviceConfiguration(passcodeCost: .minimal))
        try store.device.unlock()
        return store
    }

    /// The on-disk entries of a store directory (not metadata, not debris).
    func entries(_ disk: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: disk, includingPropertiesForKeys: nil)
            .filter { ProtectedStore.isEntryName($0.lastPathComponent) }
    }

    @Test("debris of interrupted writes, creations and removals, at any depth, is removed when the store opens")
    func debrisIsRemovedAtOpen() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var store: ProtectedStore? = try makeStore()
        try store!.write(Data("kept".utf8), to: "Documents/a/b.txt")
        store = nil
        let files = directory.appendingPathComponent("files")
        let sub = try #require(try entries(files).first)
        for place in [files, sub] {
            try Data("torn".utf8).write(to: place.appendingPathComponent(".tmp-x-123"))
            let dir = place.appendingPathComponent(".tmp-dir-abc")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            try Data("half".utf8).write(to: dir.appendingPathComponent("dpdir"))
        }
        let reopened = try ProtectedStore(directory: directory, clock: VirtualClock(),
                                          configuration: DeviceConfiguration(passcodeCost: .minimal))
        try reopened.device.unlock()
        #expect(try reopened.contents(atPath: "Documents/a/b.txt") == Data("kept".utf8))
        for place in [files, sub] {
            let names = try FileManager.default.contentsOfDirectory(atPath: place.path)
            #expect(!names.contains { $0.hasPrefix(".tmp-") }, "debris left in \(place.lastPathComponent): \(names)")
        }
    }

    @Test("a tampered class byte cannot choose the class of the file that replaces it")
    func tamperedClassByteDoesNotDowngrade() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        try store.write(Data("secret".utf8), to: "f", protection: .complete)
        let disk = try #require(try entries(directory.appendingPathComponent("files")).first)
        var bytes = try Data(contentsOf: disk)
        bytes[5] = FileHeader.classByte(.none)   // slot 0's class byte
        try bytes.write(to: disk)
        #expect(try store.attributesOfItem(atPath: "f").protectionClass == ProtectionClass.none)  // stat shows what the header states
        try store.write(Data("replacement".utf8), to: "f")
        #expect(try store.attributesOfItem(atPath: "f").protectionClass == .default, "the forged `none` was taken over")
    }

    @Test("replacing a file without a class keeps its authenticated class")
    func replacementKeepsAuthenticatedClass() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        for protectionClass in ProtectionClass.allCases {
            try store.write(Data("v1".utf8), to: "\(protectionClass)", protection: ProtectionChoice(protectionClass))
            try store.write(Data("v2".utf8), to: "\(protectionClass)")
            #expect(try store.attributesOfItem(atPath: "\(protectionClass)").protectionClass == protectionClass)
        }
    }

    @Test("at rest, a single byte appended after a short last record is detected", arguments: [1, 100, 16385, 40_000])
    func appendedByteIsDetected(size: Int) throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try makeStore()
        try store.write(Data(repeating: 9, count: size), to: "f", protection: .complete)
        let handle = try store.openFile(atPath: "f")
        try handle.write(contentsOf: Data("edit".utf8), atOffset: 0)   // a handle flush, then a close
        try handle.close()
        let disk = try #require(try entries(directory.appendingPathComponent("files")).first)
        let file = try FileHandle(forWritingTo: disk)
        try file.seekToEnd()
        try file.write(contentsOf: Data([0]))
        try file.close()
        do {
            _ = try store.contents(atPath: "f")
            Issue.record("a file with a byte appended was read")
        } catch {
            #expect(error.code == .integrityFailure)
        }
    }
}
