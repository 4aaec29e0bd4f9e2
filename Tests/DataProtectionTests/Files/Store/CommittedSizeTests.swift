import Foundation
import Testing
@testable import DataProtection

/// `stat` reads the committed size, whatever the handles did before a crash (issue 38.4): a
/// handle's commits may stand in a chain of journals beside the file, ahead of its header, when
/// the process dies; the next open replays them, and a size read from the header alone showed
/// the older length (0 for a new file) until then. 20 of 40,000 random scenarios hit it, after
/// a `sync` or after a `close` while another handle on the file stayed open.
@Suite("Committed size after a crash")
struct CommittedSizeTests {
    /// How a handle's writes were committed before the crash.
    enum Commit: String, CaseIterable, CustomTestStringConvertible {
        /// `synchronize()` on the writing handle.
        case sync
        /// `close()` of the writing handle while another handle on the file stays open.
        case closeBesideAnotherHandle

        var testDescription: String { rawValue }
    }

    /// Files written through a handle: a new file, one grown over its end (overwrite and growth
    /// in one commit), one appended to in several commits (a chain of several journals). Returns
    /// each path with the content committed, and the handles, to be kept open until the crash (a
    /// handle released earlier closes its file, which ends the chain with a header).
    private static func writeThroughHandles(
        _ store: ProtectedStore, _ protectionClass: ProtectionClass, commit: Commit
    ) throws -> (committed: [String: Data], handles: [ProtectedFileHandle]) {
        let protection = ProtectionChoice(protectionClass)
        var committed: [String: Data] = [:]
        var readers: [ProtectedFileHandle] = []

        let fresh = patternBytes(5_000, seed: 1)
        let created = try store.openFile(atPath: "new", create: true, protection: protection)
        readers.append(try store.openFile(atPath: "new", mode: .read))
        try created.write(contentsOf: fresh)
        committed["new"] = fresh

        var grown = patternBytes(20_000, seed: 2)
        try store.write(grown, to: "grown", protection: protection)
        let grower = try store.openFile(atPath: "grown")
        readers.append(try store.openFile(atPath: "grown", mode: .read))
        let over = patternBytes(30_000, seed: 3)
        try grower.write(contentsOf: over, atOffset: 10_000)
        grown.replaceSubrange(10_000..., with: over)
        committed["grown"] = grown

        var appended = patternBytes(3_000, seed: 4)
        try store.write(appended, to: "dir/appended", protection: protection)
        let appender = try store.openFile(atPath: "dir/appended", mode: .append)
        readers.append(try store.openFile(atPath: "dir/appended", mode: .read))
        for round in 0..<3 {
            let piece = patternBytes(7_000, seed: 10 + UInt64(round))
            try appender.write(contentsOf: piece)
            appended.append(piece)
            try appender.synchronize()  // one commit each: a chain of journals
        }
        committed["dir/appended"] = appended

        for handle in [created, grower, appender] {
            switch commit {
            case .sync: try handle.synchronize()
            case .closeBesideAnotherHandle: try handle.close()
            }
        }
        return (committed, readers + [created, grower, appender])
    }

    @Test("stat after a crash shows the size the next read returns, before and after the unlock",
          arguments: ProtectionClass.allCases, Commit.allCases)
    func statAfterCrash(_ protectionClass: ProtectionClass, commit: Commit) throws {
        try withStore { fixture in
            let store = fixture.store
            let (committed, handles) = try Self.writeThroughHandles(store, protectionClass, commit: commit)
            try withExtendedLifetime(handles) { try fixture.device.crash() }
            // Booted: only class `none` has its key (the chain authenticated); the others read it
            // as the header is, without a key.
            for (path, content) in committed {
                let attributes = try store.attributesOfItem(atPath: path)
                #expect(attributes.size == UInt64(content.count), "\(path) while booted")
                #expect(attributes.protectionClass == protectionClass)
            }
            try fixture.unlock()
            for (path, content) in committed {
                #expect(try store.attributesOfItem(atPath: path).size == UInt64(content.count), "\(path) after the unlock, unread")
            }
            for (path, content) in committed {
                #expect(try store.contents(atPath: path) == content, "\(path)")
                #expect(try store.attributesOfItem(atPath: path).size == UInt64(content.count), "\(path) after the read")
            }
        }
    }

    @Test("a chain whose MAC does not verify counts for nothing: stat with the key agrees with the read")
    func tamperedChain() throws {
        try withStore { fixture in
            let store = fixture.store
            try store.write(patternBytes(20_000, seed: 2), to: "f")
            let handle = try store.openFile(atPath: "f")
            try handle.write(contentsOf: patternBytes(30_000, seed: 3), atOffset: 10_000)
            try handle.synchronize()
            try withExtendedLifetime(handle) { try fixture.device.crash() }
            let journals = try FileManager.default.contentsOfDirectory(atPath: fixture.filesDirectory.path).filter { $0.hasSuffix(".j") }
            let name = try #require(journals.first, "the crash left the chain in its journal")
            let url = fixture.filesDirectory.appendingPathComponent(name)
            var journal = try Data(contentsOf: url)
            let body = try #require(FileJournal.parse(journal)?.bodyLength)
            journal[body] ^= 0x01  // the first journal's MAC
            try journal.write(to: url)
            try fixture.unlock()
            #expect(try store.attributesOfItem(atPath: "f").size == 20_000, "the header's length: the chain does not authenticate")
            #expect(try store.contents(atPath: "f").count == 20_000)
        }
    }
}
