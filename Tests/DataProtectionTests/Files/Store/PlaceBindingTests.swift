import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// A file's and a directory's content is bound to its place (parent directory and name,
/// `Keys/file-format.md` §10.2): entries moved behind the store's back on disk are refused
/// with `integrityFailure`, never served under the other name; `mv` through the store
/// rebinds them, and a class change away from `none` re-encrypts under a new key.
@Suite("Entries bound to their place")
struct PlaceBindingTests {
    /// Exchanges two on-disk entries (files or directories) by renaming, as an attacker with
    /// the data directory would.
    static func exchange(_ a: URL, _ b: URL) throws {
        let aside = a.deletingLastPathComponent().appendingPathComponent("aside")
        try FileManager.default.moveItem(at: a, to: aside)
        try FileManager.default.moveItem(at: b, to: a)
        try FileManager.default.moveItem(at: aside, to: b)
    }

    /// Every way the store reads or changes the entry at `path`: each must be `integrityFailure`.
    static func expectRefused(_ fixture: StoreFixture, _ path: String, file: Bool, _ context: String) {
        let store = fixture.store
        var attempts: [(String, () throws -> Void)] = [
            ("stat", { _ = try store.attributesOfItem(atPath: path) }),
            ("mv", { try store.moveItem(atPath: path, toPath: "/elsewhere") }),
        ]
        if file {
            attempts += [
                ("contents", { _ = try store.contents(atPath: path) }),
                ("handle", { _ = try store.fileHandle(forReadingAtPath: path) }),
                ("cp", { try store.copyItem(atPath: path, toPath: "/copy") }),
                ("set-class", { try store.setProtectionClass(.complete, ofItemAtPath: path) }),
            ]
        } else {
            attempts += [
                ("ls", { _ = try store.contentsOfDirectory(atPath: path) }),
                ("set-class", { try store.setProtectionClass(.complete, ofItemAtPath: path) }),
            ]
        }
        for (name, attempt) in attempts {
            expectStoreError(.integrityFailure, "\(context): \(name) \(path)") { try attempt() }
        }
    }

    @Test("two files' names swapped on disk: both refused (contents, handle, stat, cp, mv, set-class)",
          arguments: [ProtectionClass.none, .complete, .completeUnlessOpen])
    func swappedFiles(_ protectionClass: ProtectionClass) throws {
        try withStore { fixture in
            let a = try TamperTests.writeFile(Data("alpha".utf8), to: "/a", protectionClass, in: fixture)
            let b = try TamperTests.writeFile(Data("bravo".utf8), to: "/b", protectionClass, in: fixture)
            try Self.exchange(a, b)
            Self.expectRefused(fixture, "/a", file: true, "\(protectionClass)")
            Self.expectRefused(fixture, "/b", file: true, "\(protectionClass)")
            // Put back, everything reads again: nothing was changed by the refusals.
            try Self.exchange(a, b)
            #expect(try fixture.store.contents(atPath: "/a") == Data("alpha".utf8))
            #expect(try fixture.store.contents(atPath: "/b") == Data("bravo".utf8))
        }
    }

    /// `/one/f` and `/two/f`; returns the on-disk directories of `/one` and `/two`.
    static func twoDirectoriesWithFiles(_ fixture: StoreFixture) throws -> (URL, URL) {
        let one = try TamperTests.makeDirectory("/one", in: fixture)
        let two = try TamperTests.makeDirectory("/two", in: fixture)
        try fixture.store.write(Data("in one".utf8), to: "/one/f")
        try fixture.store.write(Data("in two".utf8), to: "/two/f")
        return (one, two)
    }

    @Test("a file moved on disk into another directory, over an entry there: refused")
    func fileMovedIntoAnotherDirectory() throws {
        try withStore { fixture in
            let (one, two) = try Self.twoDirectoriesWithFiles(fixture)
            let source = try TamperTests.onlyFile(in: one)
            let target = try TamperTests.onlyFile(in: two)
            try FileManager.default.removeItem(at: target)
            try FileManager.default.moveItem(at: source, to: target)
            Self.expectRefused(fixture, "/two/f", file: true, "moved")
            #expect(throws: DataProtectionError.self) { try fixture.store.contents(atPath: "/one/f") }
        }
    }

    @Test("two directories swapped on disk (each with its dpdir and files): refused, their files too")
    func swappedDirectories() throws {
        try withStore { fixture in
            let (one, two) = try Self.twoDirectoriesWithFiles(fixture)
            try Self.exchange(one, two)
            fixture.store.forgetDirectories()  // as a fresh open would
            Self.expectRefused(fixture, "/one", file: false, "swapped")
            Self.expectRefused(fixture, "/two", file: false, "swapped")
            expectStoreError(.integrityFailure, "a file inside") { _ = try fixture.store.contents(atPath: "/one/f") }
        }
    }

    @Test("mv through the store rebinds: the file reads at its new name, and swapping it back on disk over a new file there is refused")
    func moveRebinds() throws {
        try withStore { fixture in
            let old = try TamperTests.writeFile(Data("moved".utf8), to: "/a", .complete, in: fixture)
            try fixture.store.moveItem(atPath: "/a", toPath: "/c")
            #expect(try fixture.store.contents(atPath: "/c") == Data("moved".utf8))
            let fresh = try TamperTests.writeFile(Data("new a".utf8), to: "/a", .complete, in: fixture)
            #expect(fresh.lastPathComponent == old.lastPathComponent, "the same name encrypts the same")
            let moved = try #require(try TamperTests.entries(of: fixture.filesDirectory).first {
                $0.lastPathComponent != fresh.lastPathComponent && !TamperTests.isDirectory($0)
            })
            try Self.exchange(fresh, moved)
            // Neither record of the moved file still binds its old name.
            Self.expectRefused(fixture, "/a", file: true, "after mv")
            Self.expectRefused(fixture, "/c", file: true, "after mv")
        }
    }

    @Test("a file move cut short leaves its old place in a record: the next access settles it, and moving the file back on disk is then refused")
    func crashedFileMoveSettles() throws {
        try withStore { fixture in
            let old = try TamperTests.writeFile(Data("moved".utf8), to: "/a", .complete, in: fixture)
            try fixture.store.moveItem(atPath: "/a", toPath: "/c")
            let moved = try TamperTests.onlyFile(in: fixture.filesDirectory)
            // The state a power cut leaves between the rename and the last record write:
            // record 0 still binds the old place (`Keys/file-format.md` §10.2).
            let root = try fixture.store.directoryMetadata(at: FilePath(fixture.filesDirectory.path), place: .root)
            let descriptor = try DataFileDescriptor.open(FilePath(moved.path), fileSystem: fixture.device.fileSystem)
            let fileID = try FilePlaceRecords.fileIDOf(descriptor)
            descriptor.close()
            let oldTag = try Place(directoryID: root.id, name: "a").tag(of: .file, id: fileID, device: fixture.device)
            let handle = try FileHandle(forUpdating: moved)
            try handle.seek(toOffset: UInt64(FilePlaceRecords.offsets[0]))
            try handle.write(contentsOf: oldTag)
            try handle.close()

            #expect(try fixture.store.contents(atPath: "/c") == Data("moved".utf8))  // settles the record
            try FileManager.default.moveItem(at: moved, to: old)
            Self.expectRefused(fixture, "/a", file: true, "moved back after a settled crashed move")
        }
    }

    @Test("a directory move cut short leaves its old place in its dpdir: the next access settles it, and moving it back on disk is then refused")
    func crashedDirectoryMoveSettles() throws {
        try withStore { fixture in
            let old = try TamperTests.makeDirectory("/d", in: fixture)
            try fixture.store.write(Data("inside".utf8), to: "/d/f")
            try fixture.store.moveItem(atPath: "/d", toPath: "/e")
            let moved = try #require(try TamperTests.entries(of: fixture.filesDirectory).first(where: TamperTests.isDirectory))
            // The state a power cut leaves between the rename and the last dpdir write: bound to both places.
            let root = try fixture.store.directoryMetadata(at: FilePath(fixture.filesDirectory.path), place: .root)
            let origin = Place(directoryID: root.id, name: "d"), target = Place(directoryID: root.id, name: "e")
            let metadata = try fixture.store.directoryMetadata(at: FilePath(moved.path), place: target)
            try metadata.placed(origin, target, device: fixture.device).encoded(device: fixture.device)
                .write(to: moved.appendingPathComponent(DirectoryMetadata.fileName))
            fixture.store.forgetDirectories()

            #expect(try fixture.store.contentsOfDirectory(atPath: "/e") == ["f"])  // settles the dpdir
            try FileManager.default.moveItem(at: moved, to: old)
            fixture.store.forgetDirectories()
            Self.expectRefused(fixture, "/d", file: false, "moved back after a settled crashed move")
        }
    }

    @Test("mv of a directory with files, and of an open file: everything follows, handles included")
    func moveDirectoryAndOpenFile() throws {
        try withStore { fixture in
            let store = fixture.store
            try store.write(Data("inside".utf8), to: "/d/e/f", protection: .complete)
            let handle = try store.openFile(atPath: "/d/e/f")
            try store.moveItem(atPath: "/d", toPath: "/x")
            try store.moveItem(atPath: "/x/e/f", toPath: "/x/g")
            try handle.write(contentsOf: Data("INSIDE".utf8), atOffset: 0)
            try handle.close()
            let reopened = try ScratchStore.restarted(at: fixture.root, replacing: store)
            try reopened.device.unlock(passcode: storeTestPasscode)
            #expect(try reopened.contents(atPath: "/x/g") == Data("INSIDE".utf8))
            #expect(try reopened.contentsOfDirectory(atPath: "/x").sorted() == ["e", "g"])
        }
    }

    @Test("set-class away from none re-encrypts under a new key: the old header region no longer opens the content; an open handle goes on")
    func classChangeAwayFromNoneReencrypts() throws {
        try withStore { fixture in
            let store = fixture.store
            let disk = try TamperTests.writeFile(patternBytes(40_000, seed: 3), to: "/p", .none, in: fixture)
            let before = try Data(contentsOf: disk)
            let handle = try store.openFile(atPath: "/p")
            try handle.write(contentsOf: Data("written before".utf8), atOffset: 0)
            try store.setProtectionClass(.complete, ofItemAtPath: "/p")
            try handle.write(contentsOf: Data("and after".utf8), atOffset: 100)
            try handle.synchronize()
            var expected = patternBytes(40_000, seed: 3)
            expected.replaceSubrange(0..<14, with: Data("written before".utf8))
            expected.replaceSubrange(100..<109, with: Data("and after".utf8))
            #expect(try store.contents(atPath: "/p") == expected)
            #expect(try store.attributesOfItem(atPath: "/p").protectionClass == .complete)
            let after = try Data(contentsOf: disk)
            #expect(after.subdata(in: 8..<24) != before.subdata(in: 8..<24), "a new file id")
            // The attacker's move: the old header region (class none, the old key) over the new file.
            var forged = after
            forged.replaceSubrange(0..<FileHeader.regionByteCount, with: before.prefix(FileHeader.regionByteCount))
            try handle.close()
            try forged.write(to: disk)
            try fixture.lock()
            expectStoreError(.integrityFailure, "the old none header over the new content") {
                _ = try store.contents(atPath: "/p")
            }
            // Other changes only rewrap (the file keeps its id).
            try fixture.unlock()
            try before.write(to: disk)
            try store.setProtectionClass(.completeUntilFirstUserAuthentication, ofItemAtPath: "/p")
            try store.setProtectionClass(.complete, ofItemAtPath: "/p")
            let rewrapped = try Data(contentsOf: disk)
            #expect(rewrapped.subdata(in: 8..<24) != before.subdata(in: 8..<24), "from none: new id")
            let id = rewrapped.subdata(in: 8..<24)
            try store.setProtectionClass(.completeUntilFirstUserAuthentication, ofItemAtPath: "/p")
            #expect(try Data(contentsOf: disk).subdata(in: 8..<24) == id, "between protected classes: rewrapped only")
        }
    }
}
