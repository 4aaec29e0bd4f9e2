import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// A store written before places (store layout 1: version-1 `dpdir`s, files with no place
/// records, an identity at version 1 or none) is bound where it stands when first opened,
/// crash-safely; afterwards an entry without places is refused, never bound again.
@Suite("Stores made before places: migrated on first open")
struct PlaceMigrationTests {
    /// A store with nested directories and files of several classes, unlocked.
    static func populate(_ store: ProtectedStore) throws {
        try store.write(Data("root file".utf8), to: "/r", protection: .none)
        try store.write(patternBytes(40_000, seed: 1), to: "/Documents/big", protection: .complete)
        try store.write(Data("deep".utf8), to: "/Documents/deeper/f", protection: .completeUnlessOpen)
        try store.createDirectory(atPath: "/empty")
    }

    static func check(_ store: ProtectedStore) throws {
        #expect(try store.contents(atPath: "/r") == Data("root file".utf8))
        #expect(try store.contents(atPath: "/Documents/big") == patternBytes(40_000, seed: 1))
        #expect(try store.contents(atPath: "/Documents/deeper/f") == Data("deep".utf8))
        #expect(try store.contentsOfDirectory(atPath: "/").sorted() == ["Documents", "empty", "r"])
    }

    /// Rewrites the store at `root` as the previous version left it: `dpdir` version 1, zeros
    /// where the place records are, identity files at version 1 (or none).
    static func makeLayoutOne(_ root: URL, device: Device, keepIdentity: Bool) throws {
        let files = root.appendingPathComponent("files")
        let enumerator = FileManager.default.enumerator(atPath: files.path)!
        for case let relative as String in enumerator {
            let url = files.appendingPathComponent(relative)
            let name = url.lastPathComponent
            if name == "dpdir" {
                let metadata = try DirectoryMetadata.decode(Data(contentsOf: url), device: device)
                var body = Data("DPDR".utf8) + Data([1]) + metadata.id
                body.append(metadata.protectionClass.map(FileHeader.classByte) ?? 0)
                try (body + DirectoryMetadata.mac(body, device: device)).write(to: url)
            } else if !name.hasPrefix("."), !TamperTests.isDirectory(url) {
                var data = try Data(contentsOf: url)
                data.replaceSubrange(480..<512, with: Data(count: 32))
                data.replaceSubrange(992..<1024, with: Data(count: 32))
                try data.write(to: url)
            }
        }
        for url in [files.appendingPathComponent(".dpstore"), root.appendingPathComponent("device/store-id")] {
            if keepIdentity {
                var data = try Data(contentsOf: url)
                data[4] = 1
                try data.write(to: url)
            } else {
                try FileManager.default.removeItem(at: url)
            }
        }
    }

    @Test("a layout-1 store (identity at version 1, or none) opens with every entry bound; unbound entries are refused afterwards",
          arguments: [true, false])
    func migrated(keepIdentity: Bool) throws {
        try withScratchDirectory { root in
            let store = try ScratchStore.unlocked(at: root, on: PosixFileSystem(), passcode: "1234")
            try Self.populate(store)
            try Self.makeLayoutOne(root, device: store.device, keepIdentity: keepIdentity)
            let migrated = try ScratchStore.restarted(at: root, replacing: store)
            try migrated.device.unlock(passcode: "1234")
            try Self.check(migrated)
            let identity = try Data(contentsOf: root.appendingPathComponent("device/store-id"))
            #expect(identity[4] == 2, "the device records layout 2")
            // Once migrated, a file stripped of its records (made to look unmigrated) is refused.
            let disk = try TamperTests.onlyFile(in: root.appendingPathComponent("files"))
            var data = try Data(contentsOf: disk)
            data.replaceSubrange(480..<512, with: Data(count: 32))
            data.replaceSubrange(992..<1024, with: Data(count: 32))
            try data.write(to: disk)
            let again = try ScratchStore.restarted(at: root, replacing: migrated)
            try again.device.unlock(passcode: "1234")
            expectStoreError(.integrityFailure, "a file without places in a layout-2 store") { _ = try again.contents(atPath: "/r") }
        }
    }

    @Test("a power cut at every step of the migration: the next open finishes it", arguments: CrashingFileSystem.Mode.deviceCases)
    func migrationCutAtEveryStep(_ mode: CrashingFileSystem.Mode) throws {
        let steps = try withScratchDirectory { root in
            let store = try ScratchStore.unlocked(at: root, on: PosixFileSystem(), passcode: "1234")
            try Self.populate(store)
            try Self.makeLayoutOne(root, device: store.device, keepIdentity: true)
            let counter = CrashingFileSystem(mode: .keepEverything)
            store.device.relinquishOwnership()
            let device = try Device(directory: FilePath(root.appendingPathComponent("device").path), clock: VirtualClock(),
                                    configuration: .testing(), fileSystem: counter)
            counter.arm(crashAt: nil)
            _ = try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
            device.relinquishOwnership()
            return counter.operations
        }
        #expect(steps >= 10)
        var cuts = 0
        for step in 1...steps {
            try withScratchDirectory { root in
                let store = try ScratchStore.unlocked(at: root, on: PosixFileSystem(), passcode: "1234")
                try Self.populate(store)
                try Self.makeLayoutOne(root, device: store.device, keepIdentity: true)
                store.device.relinquishOwnership()
                let crashing = CrashingFileSystem(mode: mode)
                crashing.arm(crashAt: step)
                var cut: ProtectedStore?
                do {
                    let device = try Device(directory: FilePath(root.appendingPathComponent("device").path), clock: VirtualClock(),
                                            configuration: .testing(), fileSystem: crashing)
                    defer { device.relinquishOwnership() }
                    cut = try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
                } catch {}
                if crashing.hasCrashed { cuts += 1 }
                withExtendedLifetime(cut) {}
                let restarted = try ScratchStore.restarted(at: root, replacing: store)
                try restarted.device.unlock(passcode: "1234")
                try Self.check(restarted)
            }
        }
        #expect(cuts >= steps - 1, "\(cuts) of \(steps) steps cut")
    }
    @Test("a layout-2 store whose store-id is deleted or set to layout 1 is not migrated: two files swapped on disk stay integrityFailure",
          arguments: [false, true])
    func noDowngrade(keepIdentity: Bool) throws {
        try withScratchDirectory { root in
            let store = try ScratchStore.unlocked(at: root, on: PosixFileSystem(), passcode: "1234")
            try store.write(Data("first".utf8), to: "/a", protection: .none)
            try store.write(Data("second".utf8), to: "/b", protection: .none)
            let files = root.appendingPathComponent("files")
            let onDisk = try TamperTests.entries(of: files).filter { !TamperTests.isDirectory($0) }
            try #require(onDisk.count == 2)
            let aside = files.appendingPathComponent(".swap")
            try FileManager.default.moveItem(at: onDisk[0], to: aside)
            try FileManager.default.moveItem(at: onDisk[1], to: onDisk[0])
            try FileManager.default.moveItem(at: aside, to: onDisk[1])
            let identity = root.appendingPathComponent("device/store-id")
            if keepIdentity {
                var data = try Data(contentsOf: identity)
                data[4] = 1
                try data.write(to: identity)
            } else {
                try FileManager.default.removeItem(at: identity)
            }
            let reopened = try ScratchStore.restarted(at: root, replacing: store)
            try reopened.device.unlock(passcode: "1234")
            for path in ["/a", "/b"] {
                expectStoreError(.integrityFailure, "\(path) swapped on disk, with store-id downgraded") { _ = try reopened.contents(atPath: path) }
            }
            #expect(try Data(contentsOf: identity)[4] == 2, "store-id is at layout 2 again, nothing re-bound")
        }
    }
}
