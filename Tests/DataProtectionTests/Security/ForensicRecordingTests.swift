import Foundation
import SodiumBridge
import SystemPackage
import Testing
@testable import DataProtection

/// An attacker with a disk image (issue 12): what the disk still holds after
/// passcode changes and an erase must open nothing it should not.
///
/// ``RecordingFileSystem`` models the disk as a forensic tool sees it: a file's
/// blocks are freed, not wiped, when it is unlinked or replaced by a `rename`,
/// so every such version stays recoverable; bytes overwritten in place (the same
/// blocks) are gone. It also keeps the full history of every byte ever written,
/// to check that some things were never written at all.
@Suite("Forensics: every keybag and effaceable key the disk ever held", .serialized)
struct ForensicRecordingTests {
    final class RecordingFileSystem: ForwardingFileSystem, @unchecked Sendable {
        let base = PosixFileSystem()
        private let lock = NSLock()
        private var paths: [CInt: FilePath] = [:]
        /// Contents of files unlinked or replaced: their blocks are free but not wiped.
        private(set) var freed: [Data] = []
        /// Every content any file ever had after a write, overwritten or not.
        private(set) var history: [Data] = []

        private func remember(_ descriptor: FileDescriptor, _ path: FilePath) {
            lock.withLock { paths[descriptor.rawValue] = path }
        }

        private func recordWrite(_ descriptor: FileDescriptor) {
            guard let path = lock.withLock({ paths[descriptor.rawValue] }),
                  let content = try? base.readFile(at: path, limit: .max) else { return }
            lock.withLock { history.append(content) }
        }

        /// The regular files at or under `path`, read before they are freed.
        private func free(_ path: FilePath) {
            guard let status = try? base.status(at: path) else { return }
            var found: [Data] = []
            if status.kind == .directory {
                let enumerator = FileManager.default.enumerator(atPath: path.string)
                while let name = enumerator?.nextObject() as? String {
                    if let content = try? base.readFile(at: path.appending(name), limit: .max) { found.append(content) }
                }
            } else if status.kind == .regular, let content = try? base.readFile(at: path, limit: .max) {
                found.append(content)
            }
            lock.withLock { freed.append(contentsOf: found) }
        }

        func createFile(at path: FilePath) throws(DataProtectionError) -> FileDescriptor {
            let descriptor = try base.createFile(at: path)
            remember(descriptor, path)
            return descriptor
        }
        func openDataFile(at path: FilePath, create: Bool) throws(DataProtectionError) -> FileDescriptor {
            let descriptor = try base.openDataFile(at: path, create: create)
            remember(descriptor, path)
            return descriptor
        }
        func write(_ bytes: FileBytes, to descriptor: FileDescriptor, path: FilePath) throws(DataProtectionError) {
            try base.write(bytes, to: descriptor, path: path)
            recordWrite(descriptor)
        }
        func write(_ parts: [FileBytes], to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
            try base.write(parts, to: descriptor, at: offset, path: path)
            recordWrite(descriptor)
        }
        func write(_ data: Data, range: Range<Int>, to descriptor: FileDescriptor, at offset: Int64, path: FilePath) throws(DataProtectionError) {
            try base.write(data, range: range, to: descriptor, at: offset, path: path)
            recordWrite(descriptor)
        }
        func rename(_ source: FilePath, to destination: FilePath) throws(DataProtectionError) {
            if let replaced = try? base.status(at: destination), let moved = try? base.status(at: source),
               replaced.identity != moved.identity {
                free(destination)
            }
            try base.rename(source, to: destination)
            lock.withLock {
                for (raw, path) in paths where path == source { paths[raw] = destination }
            }
        }
        func removeFile(at path: FilePath) throws(DataProtectionError) {
            free(path)
            try base.removeFile(at: path)
        }
        func removeTree(at path: FilePath) throws(DataProtectionError) {
            free(path)
            try base.removeTree(at: path)
        }

        /// What an image of the disk holds now: every live file under `root`, and every freed version.
        func recoverable(under root: URL) -> [Data] {
            var live: [Data] = []
            let enumerator = FileManager.default.enumerator(atPath: root.path)
            while let name = enumerator?.nextObject() as? String {
                if let content = try? base.readFile(at: FilePath(root.appendingPathComponent(name).path), limit: .max) { live.append(content) }
            }
            return live + lock.withLock { freed }
        }
    }

    /// The keybags (`"DPKB"…`) and the non-zero effaceable key slots (`"DPEF"…`) among `blobs`.
    static func candidates(_ blobs: [Data]) -> (keybags: Set<Data>, keys: [SecureBytes]) {
        var keybags = Set<Data>()
        var keys: [Data] = []
        for blob in blobs {
            if blob.starts(with: Data("DPKB".utf8)) { keybags.insert(blob) }
            if blob.starts(with: Data("DPEF".utf8)) {
                for offset in stride(from: 5, to: blob.count - 31, by: 32) {
                    let slot = blob.subdata(in: offset..<offset + 32)
                    if slot.contains(where: { $0 != 0 }) && !keys.contains(slot) { keys.append(slot) }
                }
            }
        }
        let secrets = keys.map { key in SecureBytes(count: 32) { $0.copyBytes(from: key) } }
        return (keybags, secrets)
    }

    /// Every (keybag, key) pair among `blobs` that opens: the keybags an attacker can read.
    static func openable(_ blobs: [Data], hierarchy: KeyHierarchy) -> [Keybag] {
        let (keybags, keys) = candidates(blobs)
        var opened: [Keybag] = []
        for file in keybags {
            for key in keys {
                if let keybag = try? Keybag.open(file: file, sealKey: try hierarchy.sealKey(effaceable: key)) {
                    opened.append(keybag)
                }
            }
        }
        return opened
    }

    /// Every slot key of `keybag` that opens without a passcode (device-only key or no-passcode key).
    static func keysWithoutPasscode(_ keybag: Keybag, hierarchy: KeyHierarchy) throws -> [Data] {
        let deviceOnly = try hierarchy.deviceOnlyKey()
        let noPasscode = try hierarchy.passcodeKey(passcode: SecureBytes(count: 0), parameters: .none)
        return KeybagSlot.allCases.compactMap { slot in
            (keybag.unwrap(slot, with: deviceOnly) ?? keybag.unwrap(slot, with: noPasscode)).map { key in
                key.withUnsafeBytes { Data($0) }
            }
        }
    }

    @Test("init with a passcode, a change, a removal and an erase: no keybag on the disk opens without the current passcode, and after the erase nothing from before opens")
    func passcodeLifecycleAndErase() throws {
        try withScratchDirectory { root in
            let recorder = RecordingFileSystem()
            let device = try Device(directory: FilePath(root.appendingPathComponent("device").path), clock: VirtualClock(),
                                    configuration: .testing(), fileSystem: recorder, creatingWithPasscode: Passcode("1111"))
            let store = try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
            let hierarchy = device.hierarchy
            try device.unlock(passcode: "1111")
            try store.createDirectory(atPath: "Secret names")
            try store.write(Data("class none content".utf8), to: "Secret names/plain.txt", protection: .none)
            try store.write(Data("complete content".utf8), to: "Secret names/complete.txt", protection: .complete)

            // Created with its passcode: no keybag ever written, under any key ever written, opens without it.
            for keybag in Self.openable(recorder.history, hierarchy: hierarchy) {
                #expect(keybag.passcode != .none, "a passcode-free keybag was written at creation")
            }

            try device.changePasscode(from: "1111", to: "2222")
            var opened = Self.openable(recorder.recoverable(under: root), hierarchy: hierarchy)
            #expect(opened.count == 1, "after a change, only the current keybag opens (\(opened.count) do)")
            for keybag in opened {
                #expect(keybag.passcode != .none)
                // Only class none and the metadata key are readable without the passcode.
                #expect(try Self.keysWithoutPasscode(keybag, hierarchy: hierarchy).count == 2)
            }

            try device.removePasscode("2222")
            opened = Self.openable(recorder.recoverable(under: root), hierarchy: hierarchy)
            #expect(opened.count == 1, "after a removal, only the current keybag opens (\(opened.count) do)")
            let before = Set(try opened.flatMap { try Self.keysWithoutPasscode($0, hierarchy: hierarchy) })
            #expect(before.count == KeybagSlot.allCases.count, "without a passcode the current keybag opens every class")

            try device.erase()
            let blobs = recorder.recoverable(under: root)
            opened = Self.openable(blobs, hierarchy: hierarchy)
            #expect(opened.count == 1, "after the erase, only the fresh keybag opens (\(opened.count) do)")
            let after = Set(try opened.flatMap { try Self.keysWithoutPasscode($0, hierarchy: hierarchy) })
            #expect(after.isDisjoint(with: before), "a key from before the erase is still recoverable")
            // The store's files are gone from the live tree, and the store works.
            #expect(try store.contentsOfDirectory(atPath: "/").isEmpty)
            try device.unlock()
            try store.write(Data("after".utf8), to: "new.txt")
            #expect(try store.contents(atPath: "new.txt") == Data("after".utf8))
            #expect(blobs.count > 10, "the recording saw the disk (\(blobs.count) versions)")
        }
    }
}
