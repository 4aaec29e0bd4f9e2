import Foundation
import Testing
@testable import DataProtection

/// A directory's class at creation (issue 38.5, semantics.md "Protection classes"): a directory
/// made without a class records its parent's class of that moment, so `stat` and its new files
/// agree, whatever is set above it later; a `dpdir` an earlier writer left with no class
/// (`0x00`) still reads, as the class its files took then.
@Suite("Directory class at creation")
struct DirectoryClassTests {
    /// The class recorded in the `dpdir` of the store directory `name` in the root (`nil`: `0x00`).
    private static func recordedClass(_ name: String, in fixture: StoreFixture) throws -> ProtectionClass?? {
        for url in try FileManager.default.contentsOfDirectory(at: fixture.filesDirectory, includingPropertiesForKeys: nil)
        where TamperTests.isDirectory(url) && !url.lastPathComponent.hasPrefix(".") {
            guard try NameCipher.decrypt(url.lastPathComponent, directoryID: rootID(fixture), device: fixture.device) == name else { continue }
            let metadata = try DirectoryMetadata.decode(Data(contentsOf: url.appendingPathComponent(DirectoryMetadata.fileName)),
                                                        device: fixture.device)
            return .some(metadata.protectionClass)
        }
        return nil
    }

    private static func rootID(_ fixture: StoreFixture) throws -> Data {
        try DirectoryMetadata.decode(Data(contentsOf: fixture.filesDirectory.appendingPathComponent(DirectoryMetadata.fileName)),
                                     device: fixture.device).id
    }

    @Test("a directory made without a class records its parent's class; stat and its new files agree after an ancestor's change")
    func recordsParentClass() throws {
        try withStore { fixture in
            let store = fixture.store
            try store.createDirectory(atPath: "plain/inner")
            try store.createDirectory(atPath: "strict", protection: .complete)
            try store.createDirectory(atPath: "strict/inner")
            #expect(try Self.recordedClass("plain", in: fixture) == .some(.completeUntilFirstUserAuthentication),
                    "the root's class (none set: C) is recorded, not 0x00")
            #expect(try Self.recordedClass("strict", in: fixture) == .some(.complete))

            try store.setProtectionClass(.none, ofItemAtPath: "/")
            try store.setProtectionClass(.completeUnlessOpen, ofItemAtPath: "plain")
            for (directory, expected) in [("/", ProtectionClass.none), ("plain", .completeUnlessOpen),
                                          ("plain/inner", .completeUntilFirstUserAuthentication), ("strict/inner", .complete)] {
                #expect(try store.attributesOfItem(atPath: directory).protectionClass == expected, "stat \(directory)")
                let file = directory == "/" ? "/f" : directory + "/f"
                try store.write(Data("x".utf8), to: file)
                #expect(try store.attributesOfItem(atPath: file).protectionClass == expected, "a new file in \(directory)")
            }
            try store.createDirectory(atPath: "later")
            #expect(try Self.recordedClass("later", in: fixture) == .some(ProtectionClass.none))
        }
    }

    @Test("a directory an earlier writer left with no class reads as completeUntilFirstUserAuthentication, whatever the root's class")
    func earlierDirectoryWithoutClass() throws {
        try withStore { fixture in
            let store = fixture.store
            try store.createDirectory(atPath: "old")
            // As an earlier writer left it: 0x00 in its dpdir (authentic, bound to its place).
            let entries = try FileManager.default.contentsOfDirectory(at: fixture.filesDirectory, includingPropertiesForKeys: nil)
            let old = try #require(entries.first { TamperTests.isDirectory($0) && !$0.lastPathComponent.hasPrefix(".") })
            let url = old.appendingPathComponent(DirectoryMetadata.fileName)
            var metadata = try DirectoryMetadata.decode(Data(contentsOf: url), device: fixture.device)
            metadata.protectionClass = nil
            try metadata.encoded(device: fixture.device).write(to: url)
            store.forgetDirectories()
            #expect(try Self.recordedClass("old", in: fixture) == .some(nil))

            try store.setProtectionClass(.complete, ofItemAtPath: "/")
            #expect(try store.attributesOfItem(atPath: "old").protectionClass == .completeUntilFirstUserAuthentication)
            try store.write(Data("x".utf8), to: "old/f")
            #expect(try store.attributesOfItem(atPath: "old/f").protectionClass == .completeUntilFirstUserAuthentication)
            try store.createDirectory(atPath: "old/sub")
            #expect(try store.attributesOfItem(atPath: "old/sub").protectionClass == .completeUntilFirstUserAuthentication)
            let handle = try store.openFile(atPath: "old/sub/h", create: true)
            try handle.close()
            #expect(try store.attributesOfItem(atPath: "old/sub/h").protectionClass == .completeUntilFirstUserAuthentication)
        }
    }
}
