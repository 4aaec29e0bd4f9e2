import Foundation
import SodiumBridge
import SystemPackage
import Testing
@testable import DataProtection

/// `AtomicFileWriter`: a crash at any instant leaves the old file or the new
/// one, never a mixture; debris is recognisable and removed.
@Suite("Atomic file writer")
struct AtomicFileWriterTests {
    @Test("writes public and secret parts in order, mode 0600, and leaves no temporary file")
    func writesParts() throws {
        try withScratchDirectory { root in
            let path = FilePath(root.path).appending("file")
            let secret = SecureBytes(copyingUTF8: "secret")
            try AtomicFileWriter(fileSystem: PosixFileSystem()).write([.data(Data("public-".utf8)), .secret(secret)], to: path)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path.string)) == Data("public-secret".utf8))
            #expect(try FileManager.default.contentsOfDirectory(atPath: root.path) == ["file"])
            let attributes = try FileManager.default.attributesOfItem(atPath: path.string)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
        }
    }

    @Test("replaces an existing file")
    func replaces() throws {
        try withScratchDirectory { root in
            let path = FilePath(root.path).appending("file")
            let writer = AtomicFileWriter(fileSystem: PosixFileSystem())
            try writer.write([.data(Data("old".utf8))], to: path)
            try writer.write([.data(Data("new".utf8))], to: path)
            #expect(try PosixFileSystem().readFile(at: path, limit: .max) == Data("new".utf8))
            #expect(try FileManager.default.contentsOfDirectory(atPath: root.path) == ["file"])
        }
    }

    @Test("removeDebris removes temporary files only")
    func removeDebris() throws {
        try withScratchDirectory { root in
            for name in [".tmp-keybag-00", ".tmp-x", "keybag", ".tmpnot", "tmp-"] {
                try Data().write(to: root.appendingPathComponent(name))
            }
            try AtomicFileWriter(fileSystem: PosixFileSystem()).removeDebris(in: FilePath(root.path))
            #expect(try FileManager.default.contentsOfDirectory(atPath: root.path).sorted() == [".tmpnot", "keybag", "tmp-"])
        }
    }

    @Test("a path without a file name is invalidArgument")
    func noFileName() {
        expectError(.invalidArgument) { try AtomicFileWriter(fileSystem: PosixFileSystem()).write([], to: FilePath("/")) }
    }

    @Test("a crash at every step leaves the old content or the new, never anything else",
          arguments: CrashingFileSystem.Mode.allCases)
    func crashAtEveryStep(_ mode: CrashingFileSystem.Mode) throws {
        let old = Data("old content".utf8)
        let new = Data(repeating: 0x6E, count: 1000)
        let counter = CrashingFileSystem(mode: mode)
        let steps = try withScratchDirectory { root in
            let path = FilePath(root.path).appending("file")
            try AtomicFileWriter(fileSystem: PosixFileSystem()).write([.data(old)], to: path)
            counter.arm(crashAt: nil)
            try AtomicFileWriter(fileSystem: counter).write([.data(new)], to: path)
            return counter.operations
        }
        #expect(steps == 6)   // create, write, fsync, close, rename, fsync directory

        var outcomes: Set<String> = []
        for step in 1...steps {
            try withScratchDirectory { root in
                let path = FilePath(root.path).appending("file")
                try AtomicFileWriter(fileSystem: PosixFileSystem()).write([.data(old)], to: path)
                let crashing = CrashingFileSystem(mode: mode)
                crashing.arm(crashAt: step)
                #expect(throws: DataProtectionError.self) {
                    try AtomicFileWriter(fileSystem: crashing).write([.data(new)], to: path)
                }
                #expect(crashing.hasCrashed)
                try AtomicFileWriter(fileSystem: PosixFileSystem()).removeDebris(in: FilePath(root.path))
                let content = try PosixFileSystem().readFile(at: path, limit: .max)
                #expect(content == old || content == new, "step \(step): \(content.map { "\($0.count) bytes" } ?? "missing")")
                outcomes.insert(content == old ? "old" : "new")
                #expect(try FileManager.default.contentsOfDirectory(atPath: root.path) == ["file"])
            }
        }
        // Crashing before the directory fsync keeps the new file only when nothing is lost.
        #expect(outcomes == (mode == .keepEverything ? ["old", "new"] : ["old"]))
    }

    @Test("a crash while creating a file leaves no file or the whole file", arguments: CrashingFileSystem.Mode.allCases)
    func crashWhileCreating(_ mode: CrashingFileSystem.Mode) throws {
        let new = Data("complete".utf8)
        for step in 1...6 {
            try withScratchDirectory { root in
                let path = FilePath(root.path).appending("file")
                let crashing = CrashingFileSystem(mode: mode)
                crashing.arm(crashAt: step)
                #expect(throws: DataProtectionError.self) {
                    try AtomicFileWriter(fileSystem: crashing).write([.data(new)], to: path)
                }
                try AtomicFileWriter(fileSystem: PosixFileSystem()).removeDebris(in: FilePath(root.path))
                let content = try PosixFileSystem().readFile(at: path, limit: .max)
                #expect(content == nil || content == new, "step \(step)")
            }
        }
    }
}
