import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// Hostile paths and planted links: nothing is ever read or written outside the
/// store, and what is refused is refused with a clear error. Creation modes:
/// 0600 for every file (data, journal, metadata, temporary, device files), 0700
/// for every directory, whatever the umask.
///
/// (String paths with `..` or NUL bytes are refused with `invalidPath` by every
/// operation: `ClassStateTableTests.invalidPathWinsOverEverything`; `.` and empty
/// components are ignored, as in POSIX: Tests/Scenarios/paths.scenario.)
@Suite("Hostile paths, planted links and modes", .serialized)
struct HostilePathTests {
    /// A store in `root/store`, and an attacker's directory `root/outside`.
    final class Fixture {
        let root: URL
        let store: ProtectedStore
        let fileSystem = FaultInjectingFileSystem()
        var storeDirectory: URL { root.appendingPathComponent("store") }
        var files: URL { storeDirectory.appendingPathComponent("files") }
        var deviceDirectory: URL { storeDirectory.appendingPathComponent("device") }
        var outside: URL { root.appendingPathComponent("outside") }

        init() throws {
            root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dph-\(UUID().uuidString.prefix(12))")
            try FileManager.default.createDirectory(at: root.appendingPathComponent("outside"), withIntermediateDirectories: true)
            store = try ProtectedStore(directory: root.appendingPathComponent("store"), clock: VirtualClock(),
                                       configuration: .testing(), fileSystem: fileSystem)
            try store.device.unlock()
            try store.device.setPasscode("1234")
        }

        deinit { try? FileManager.default.removeItem(at: root) }

        /// The on-disk entries of a store directory that are new after `body`.
        func newEntries(in directory: URL, _ body: () throws -> Void) throws -> [URL] {
            let before = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
            try body()
            let after = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
            return after.subtracting(before).filter { !$0.hasPrefix(".") }.sorted().map { directory.appendingPathComponent($0) }
        }

        /// Everything under `outside`: relative path → bytes (directories: empty), links as their target.
        func outsideContents() -> [String: Data] {
            var result: [String: Data] = [:]
            for path in (try? FileManager.default.subpathsOfDirectory(atPath: outside.path)) ?? [] {
                let url = outside.appendingPathComponent(path)
                result[path] = (try? Data(contentsOf: url)) ?? Data()
            }
            return result
        }

        /// Replaces the on-disk entry `entry` with a symbolic link to a copy of it in `outside`.
        @discardableResult
        func plantLink(replacing entry: URL, name: String) throws -> URL {
            let copy = outside.appendingPathComponent(name)
            try FileManager.default.moveItem(at: entry, to: copy)
            try FileManager.default.createSymbolicLink(at: entry, withDestinationURL: copy)
            return copy
        }
    }

    /// Every store operation on paths through `prefix`; each must be refused (not succeed),
    /// with `invalidPath` for a planted link.
    static func attackEverything(_ store: ProtectedStore, _ path: String, other: String, code: DataProtectionError.Code = .invalidPath) -> Int {
        let attempts: [(String, () throws -> Void)] = [
            ("contents", { _ = try store.contents(atPath: path) }),
            ("openFile", { _ = try store.openFile(atPath: path) }),
            ("openFile create", { _ = try store.openFile(atPath: path, create: true) }),
            ("write", { try store.write(Data("evil".utf8), to: path) }),
            ("attributes", { _ = try store.attributesOfItem(atPath: path) }),
            ("setProtectionClass", { try store.setProtectionClass(.none, ofItemAtPath: path) }),
            ("removeItem", { try store.removeItem(atPath: path) }),
            ("moveItem from", { try store.moveItem(atPath: path, toPath: other) }),
            ("copyItem", { try store.copyItem(atPath: path, toPath: other) }),
            ("createDirectory", { try store.createDirectory(atPath: path + "/sub") }),
        ]
        for (name, attempt) in attempts {
            expectStoreError(code, "\(name) \(path)") { try attempt() }
        }
        #expect(!store.fileExists(atPath: path))
        return attempts.count
    }

    @Test("a link planted in place of an encrypted directory: refused, nothing outside read or written")
    func linkInPlaceOfDirectory() throws {
        let fixture = try Fixture()
        let store = fixture.store
        let entries = try fixture.newEntries(in: fixture.files) {
            try store.write(Data("secret".utf8), to: "/dir/f")
        }
        try #require(entries.count == 1)
        try fixture.plantLink(replacing: entries[0], name: "dir-copy")
        let before = fixture.outsideContents()
        _ = Self.attackEverything(store, "/dir/f", other: "/elsewhere")
        _ = Self.attackEverything(store, "/dir/new", other: "/elsewhere")
        _ = Self.attackEverything(store, "/dir", other: "/elsewhere")
        expectStoreError(.invalidPath) { _ = try store.contentsOfDirectory(atPath: "/dir") }
        expectStoreError(.invalidPath) { try store.moveItem(atPath: "/dir", toPath: "/moved") }
        #expect(fixture.outsideContents() == before, "nothing outside changed")
    }

    @Test("a link planted in place of a protected file: refused, nothing outside read or written")
    func linkInPlaceOfFile() throws {
        let fixture = try Fixture()
        let store = fixture.store
        let entries = try fixture.newEntries(in: fixture.files) {
            try store.write(Data("secret".utf8), to: "/f")
        }
        try #require(entries.count == 1)
        try fixture.plantLink(replacing: entries[0], name: "f-copy")
        let before = fixture.outsideContents()
        _ = Self.attackEverything(store, "/f", other: "/g")
        #expect(try store.contentsOfDirectory(atPath: "/") == ["f"], "the name still decrypts; the entry is refused")
        #expect(fixture.outsideContents() == before, "nothing outside changed")
    }

    @Test("a link planted as a directory's metadata (dpdir): refused, not followed")
    func linkInPlaceOfMetadata() throws {
        let fixture = try Fixture()
        try fixture.store.write(Data("x".utf8), to: "/f")
        // A subdirectory's metadata, read on first use by a new store instance (the cache is per instance).
        let subEntries = try fixture.newEntries(in: fixture.files) { try fixture.store.createDirectory(atPath: "/sub") }
        try #require(subEntries.count == 1)
        try fixture.plantLink(replacing: subEntries[0].appendingPathComponent(DirectoryMetadata.fileName), name: "sub-dpdir")
        let second = try ProtectedStore(directory: fixture.files, device: fixture.store.device)
        expectStoreError(.invalidPath) { _ = try second.contentsOfDirectory(atPath: "/sub") }
        expectStoreError(.invalidPath) { try second.write(Data("evil".utf8), to: "/sub/g") }
        // The root's: the store refuses to open.
        try fixture.store.device.reboot()
        fixture.store.device.relinquishOwnership()
        try fixture.plantLink(replacing: fixture.files.appendingPathComponent(DirectoryMetadata.fileName), name: "dpdir")
        let device = try Device(directory: fixture.deviceDirectory, clock: VirtualClock(), configuration: .testing())
        expectStoreError(.invalidPath) { _ = try ProtectedStore(directory: fixture.files, device: device) }
    }

    @Test("a link planted as a file's journal: refused when the file opens, not followed")
    func linkInPlaceOfJournal() throws {
        let fixture = try Fixture()
        let entries = try fixture.newEntries(in: fixture.files) {
            try fixture.store.write(patternBytes(40_000, seed: 1), to: "/f")
        }
        try fixture.store.device.reboot()
        try fixture.store.device.unlock(passcode: "1234")
        let target = fixture.outside.appendingPathComponent("victim")
        try Data("outside data".utf8).write(to: target)
        try FileManager.default.createSymbolicLink(atPath: entries[0].path + FileJournal.suffix, withDestinationPath: target.path)
        expectStoreError(.invalidPath) { _ = try fixture.store.contents(atPath: "/f") }
        #expect(try Data(contentsOf: target) == Data("outside data".utf8))
    }

    @Test("device files planted as links: the device refuses to boot with invalidPath",
          arguments: ["keybag", "effaceable", "uid", "attempts", "lock"])
    func deviceFileLinks(_ name: String) throws {
        let fixture = try Fixture()
        try fixture.store.device.reboot()
        fixture.store.device.relinquishOwnership()
        try fixture.plantLink(replacing: fixture.deviceDirectory.appendingPathComponent(name), name: name)
        let before = fixture.outsideContents()
        let error = outcome { _ = try Device(directory: fixture.deviceDirectory, clock: VirtualClock(), configuration: .testing()) }
        #expect(error.errorCode == .invalidPath, "\(name): \(error)")
        #expect(fixture.outsideContents() == before)
    }

    @Test("overlong names are refused; absolute paths stay inside the store")
    func overlongAndAbsolute() throws {
        let fixture = try Fixture()
        let store = fixture.store
        let longest = String(repeating: "n", count: StorePath.maximumNameLength)
        try store.write(Data("ok".utf8), to: "/" + longest)
        #expect(try store.contents(atPath: longest) == Data("ok".utf8))
        for name in [String(repeating: "n", count: StorePath.maximumNameLength + 1), String(repeating: "é", count: 75), String(repeating: "x", count: 4_096)] {
            expectStoreError(.invalidPath) { try store.write(Data(), to: name) }
            expectStoreError(.invalidPath) { _ = try store.contents(atPath: "dir/" + name) }
            expectStoreError(.invalidPath) { try store.createDirectory(atPath: name) }
        }
        // An absolute path names a store path: the real one is untouched.
        let planted = fixture.outside.appendingPathComponent("planted")
        try store.write(Data("inside".utf8), to: planted.path)
        #expect(!FileManager.default.fileExists(atPath: planted.path))
        #expect(try store.contents(atPath: planted.path) == Data("inside".utf8))
        expectStoreError(.fileNotFound) { _ = try store.contents(atPath: "/etc/passwd") }
    }

    @Test("with umask 0, every file is created 0600 and every directory 0700 (temporaries, journals, metadata, device files)")
    func creationModes() throws {
        let previous = umask(0)
        defer { umask(previous) }
        let fixture = try Fixture()
        let store = fixture.store
        try store.write(patternBytes(40_000, seed: 1), to: "/a/b/file")
        let handle = try store.openFile(atPath: "/a/b/file")
        try handle.write(contentsOf: patternBytes(100, seed: 2), atOffset: 10)  // an overwrite: a journal
        try handle.synchronize()
        try handle.close()
        let created = try store.openFile(atPath: "/a/new", create: true)
        try created.close()
        try store.setProtectionClass(.complete, ofItemAtPath: "/a")
        try store.device.changePasscode(from: "1234", to: "5678")
        try store.moveItem(atPath: "/a/new", toPath: "/a/b/moved")
        let creations = fixture.fileSystem.created
        let journals = creations.filter { $0.path.string.hasSuffix(FileJournal.suffix) }
        let temporaries = creations.filter { $0.path.lastComponent?.string.hasPrefix(AtomicFileWriter.temporaryPrefix) == true }
        #expect(!journals.isEmpty && temporaries.count >= 5, "journals and temporaries were created: \(creations.count)")
        for (path, mode, isDirectory) in creations {
            #expect(mode == (isDirectory ? 0o700 : 0o600), "\(path) was created \(String(mode, radix: 8))")
        }
        // And what is on disk now, the store's and device's directories included.
        var checked = 0
        for base in [fixture.storeDirectory] {
            let paths = [""] + ((try? FileManager.default.subpathsOfDirectory(atPath: base.path)) ?? [])
            for relative in paths {
                let path = FilePath(base.path).appending(relative)
                let stat = try path.stat(followTargetSymlink: false)
                let mode = Int(stat.permissions.rawValue & 0o7777)
                #expect(mode == (stat.type == .directory ? 0o700 : 0o600), "\(relative) is \(String(mode, radix: 8))")
                checked += 1
            }
        }
        #expect(checked >= 12)
    }
}

extension Result where Failure == DataProtectionError {
    var errorCode: DataProtectionError.Code? {
        if case .failure(let error) = self { error.code } else { nil }
    }
}
