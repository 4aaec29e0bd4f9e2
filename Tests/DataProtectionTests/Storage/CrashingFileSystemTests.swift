import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// The crash-injection double models what it claims to, so the crash tests
/// built on it mean something.
@Suite("Crashing file system (test double)")
struct CrashingFileSystemTests {
    @Test("counts exactly the mutating operations")
    func counts() throws {
        try withScratchDirectory { root in
            let fs = CrashingFileSystem(mode: .keepEverything)
            let directory = FilePath(root.path)
            let path = directory.appending("a")
            let descriptor = try fs.createFile(at: path)
            try fs.write(.data(Data("x".utf8)), to: descriptor, path: path)
            try fs.synchronize(descriptor, path: path)
            try fs.close(descriptor, path: path)
            _ = try fs.readFile(at: path, limit: .max)
            _ = try fs.contentsOfDirectory(at: directory)
            try fs.createDirectory(at: directory)
            try fs.rename(path, to: directory.appending("b"))
            try fs.synchronizeDirectory(at: directory)
            try fs.removeFile(at: directory.appending("b"))
            #expect(fs.operations == 7)
        }
    }

    @Test("after the crash every operation fails, reads included")
    func deadAfterCrash() throws {
        try withScratchDirectory { root in
            let fs = CrashingFileSystem(mode: .keepEverything)
            fs.arm(crashAt: 1)
            let path = FilePath(root.path).appending("a")
            let error = #expect(throws: DataProtectionError.self) { _ = try fs.createFile(at: path) }
            #expect(CrashingFileSystem.isCrash(error))
            #expect(fs.hasCrashed)
            #expect(throws: DataProtectionError.self) { _ = try fs.readFile(at: path, limit: .max) }
            #expect(throws: DataProtectionError.self) { try fs.removeFile(at: path) }
            #expect(throws: DataProtectionError.self) { _ = try fs.contentsOfDirectory(at: FilePath(root.path)) }
            #expect(!FileManager.default.fileExists(atPath: path.string), "the crashing operation was performed")
        }
    }

    @Test("losing unsynced data: an unsynced write is lost, a synced one kept", arguments: [CrashingFileSystem.Loss.truncate, .garbage])
    func unsyncedWriteLost(_ loss: CrashingFileSystem.Loss) throws {
        try withScratchDirectory { root in
            let fs = CrashingFileSystem(mode: .loseUnsynced(loss))
            let directory = FilePath(root.path)
            let synced = directory.appending("synced"), unsynced = directory.appending("unsynced")
            let content = Data(repeating: 0x41, count: 64)
            for path in [synced, unsynced] {
                let descriptor = try fs.createFile(at: path)
                try fs.write(.data(content), to: descriptor, path: path)
                if path == synced { try fs.synchronize(descriptor, path: path) }
                try fs.close(descriptor, path: path)
            }
            try fs.synchronizeDirectory(at: directory)
            fs.arm(crashAt: 1)
            #expect(throws: DataProtectionError.self) { try fs.removeFile(at: synced) }
            #expect(try PosixFileSystem().readFile(at: synced, limit: .max) == content)
            #expect(try PosixFileSystem().readFile(at: unsynced, limit: .max) != content)
        }
    }

    @Test("losing unsynced data: a rename, creation and removal not followed by a directory fsync are undone")
    func directoryChangesUndone() throws {
        try withScratchDirectory { root in
            let fs = CrashingFileSystem(mode: .loseUnsynced(.truncate))
            let directory = FilePath(root.path)
            let target = directory.appending("target"), source = directory.appending("source")
            let gone = directory.appending("gone"), created = directory.appending("created")
            let posix = PosixFileSystem()
            try AtomicFileWriter(fileSystem: posix).write([.data(Data("old".utf8))], to: target)
            try AtomicFileWriter(fileSystem: posix).write([.data(Data("removed".utf8))], to: gone)
            try AtomicFileWriter(fileSystem: posix).write([.data(Data("new".utf8))], to: source)

            try fs.rename(source, to: target)
            try fs.removeFile(at: gone)
            try fs.close(try fs.createFile(at: created), path: created)
            fs.arm(crashAt: 1)
            #expect(throws: DataProtectionError.self) { try fs.synchronizeDirectory(at: directory) }

            #expect(try posix.readFile(at: target, limit: .max) == Data("old".utf8))
            #expect(try posix.readFile(at: source, limit: .max) == Data("new".utf8))
            #expect(try posix.readFile(at: gone, limit: .max) == Data("removed".utf8))
            #expect(try posix.readFile(at: created, limit: .max) == nil)
        }
    }

    @Test("keeping everything: the crash changes nothing on disk")
    func keepEverything() throws {
        try withScratchDirectory { root in
            let fs = CrashingFileSystem(mode: .keepEverything)
            let directory = FilePath(root.path)
            let path = directory.appending("a")
            let descriptor = try fs.createFile(at: path)
            try fs.write(.data(Data("kept".utf8)), to: descriptor, path: path)
            try fs.close(descriptor, path: path)
            fs.arm(crashAt: 1)
            #expect(throws: DataProtectionError.self) { try fs.synchronizeDirectory(at: directory) }
            #expect(try PosixFileSystem().readFile(at: path, limit: .max) == Data("kept".utf8))
        }
    }
}
