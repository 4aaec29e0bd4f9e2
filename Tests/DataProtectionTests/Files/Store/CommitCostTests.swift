import Foundation
import Testing
@testable import DataProtection

/// What a commit through a handle costs on disk, in `fsync`s and journal files: the kept
/// journal (created once per open file, written over in place by later chains), the chained
/// commits (one `fsync` each, their journal's; the header and the records in place made
/// durable at the checkpoint) and the journaled growth (a small growth that changes a
/// committed chunk goes through the journal whole: no allocating header, no `fsync` of its
/// records before the journal).
@Suite struct CommitCostTests {
    typealias CountingFileSystem = DeferredAppendTests.CountingFileSystem

    /// A store on a counting file system with `/f` (three full chunks and 1,000 bytes) and a
    /// handle on it that has made one overwriting commit already (its journal file exists).
    static func prepare(_ root: URL) throws -> (CountingFileSystem, ProtectedStore, ProtectedFileHandle, Data) {
        let fileSystem = CountingFileSystem()
        let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: "1234")
        var content = patternBytes(3 * 16_384 + 1_000, seed: 1)
        try store.write(content, to: "/f")
        let handle = try store.openFile(atPath: "/f")
        try handle.write(contentsOf: Data(repeating: 1, count: 10), atOffset: 100)
        try handle.synchronize()
        content.replaceSubrange(100..<110, with: Data(repeating: 1, count: 10))
        return (fileSystem, store, handle, content)
    }

    /// Cuts the power, restarts the store and checks that `path` reads `content` (what the chain
    /// in the journal file redoes).
    static func expectAfterPowerCut(
        _ store: ProtectedStore, at root: URL, path: String = "/f", reads content: Data,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try store.device.crash()
        let restarted = try ScratchStore.restarted(at: root, replacing: store)
        try restarted.device.unlock(passcode: "1234")
        #expect(try restarted.contents(atPath: path) == content, sourceLocation: sourceLocation)
    }

    @Test("overwrite commits after the first: one fsync each, the journal file reused, none created")
    func overwriteReusesTheJournal() throws {
        try withScratchDirectory { root in
            let (fileSystem, store, handle, prepared) = try Self.prepare(root)
            var content = prepared
            let journals = fileSystem.journals, syncs = fileSystem.syncs
            for round in 0..<3 {
                let patch = patternBytes(3_000, seed: UInt64(10 + round))
                try handle.write(contentsOf: patch, atOffset: UInt64(5_000 + round * 16_384))
                try handle.synchronize()
                content.replaceSubrange(5_000 + round * 16_384..<8_000 + round * 16_384, with: patch)
            }
            #expect(fileSystem.journals == journals, "no journal file created")
            #expect(fileSystem.syncs - syncs == 3, "the journal's fsync per commit, chained")
            let beforeClose = fileSystem.syncs
            try handle.close()
            #expect(fileSystem.syncs - beforeClose == 1, "the checkpoint at close: the header and the records in place")
            #expect(try store.contents(atPath: "/f") == content)
            let names = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("files").path)
            #expect(!names.contains { $0.hasSuffix(FileJournal.suffix) }, "the journal goes when the file closes: \(names)")
        }
    }

    @Test("a growth of up to 256 KiB of records that changes a committed chunk: through the journal whole, one fsync; at the checkpoint a run of records per write; the file at rest",
          arguments: [20_000, 15 * 16_384])
    func growthIsJournaled(bytes: Int) throws {
        try withScratchDirectory { root in
            let (fileSystem, store, handle, prepared) = try Self.prepare(root)
            var content = prepared
            let syncs = fileSystem.syncs
            // Regrows the last partial chunk (committed) and appends 2 or 15 records (16 KiB chunks:
            // 16 is the most): no allocating header, no `fsync` of the records before the journal.
            let tail = patternBytes(bytes, seed: 2)
            try handle.write(contentsOf: tail, atOffset: UInt64(content.count))
            try handle.synchronize()
            content.append(tail)
            #expect(fileSystem.syncs - syncs == 1, "the journal's fsync alone: the commit is chained")
            #expect(try handle.read(atOffset: 0, upToCount: content.count) == content)
            // The chain's records (chunk 0 from the first commit, chunks 3 on from this one) go in
            // place at the checkpoint in two runs, then the header.
            let writes = fileSystem.dataWrites
            try handle.close()
            #expect(fileSystem.dataWrites - writes == 3, "two runs of records and the header")
            // The store's largest file is /f's.
            let size = fileSystem.dataFiles.compactMap { try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int }.max()
            #expect(size == DeferredAppendTests.physicalSize(content.count), "at rest: exactly the committed records")
            #expect(try store.contents(atPath: "/f") == content)
        }
    }

    @Test("a chain's records wait in its journal: the file on disk is untouched until the checkpoint; reads and a crash see every commit")
    func chainedRecordsWaitForTheCheckpoint() throws {
        try withScratchDirectory { root in
            let (fileSystem, store, handle, prepared) = try Self.prepare(root)
            var content = prepared
            // 50 chunks: the new records written in place, the regrown last one through the journal (chained).
            let grown = patternBytes(50 * 16_384 - content.count, seed: 3)
            try handle.write(contentsOf: grown, atOffset: UInt64(content.count))
            content.append(grown)
            try handle.synchronize()
            let path = try #require(fileSystem.dataFiles.first { !$0.contains(".tmp-") && $0.contains("/files/") })
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            // Every chunk overwritten by one write (sealed from the caller's data, not kept in the read
            // cache: read back from the chain's records in the journal), then the same chunk rewritten by
            // several commits, and the last one regrown (a journaled growth).
            let whole = patternBytes(content.count - 1, seed: 4)
            try handle.write(contentsOf: whole, atOffset: 1)
            content.replaceSubrange(1..<content.count, with: whole)
            try handle.synchronize()
            #expect(try handle.read(atOffset: 0, upToCount: content.count) == content, "read back from the chain's records")
            for round in 0..<5 {
                let patch = patternBytes(500, seed: UInt64(30 + round))
                try handle.write(contentsOf: patch, atOffset: UInt64(2_000 + round * 100))
                content.replaceSubrange(2_000 + round * 100..<2_500 + round * 100, with: patch)
                let tail = patternBytes(300, seed: UInt64(40 + round))
                try handle.write(contentsOf: tail, atOffset: UInt64(content.count))
                content.append(tail)
                try handle.synchronize()
                #expect(try handle.read(atOffset: 0, upToCount: content.count) == content, "round \(round): read back")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "nothing written in place before the checkpoint")
            // A crash now: the chain in the journal file redoes every commit at the next open.
            try Self.expectAfterPowerCut(store, at: root, reads: content)
            withExtendedLifetime(handle) {}
        }
    }

    @Test("a log grown by 200 commits, then started over (SQLite's WAL): its records go to the journal alone, never in place")
    func recordsPastAShrinkAreNeverWrittenInPlace() throws {
        try withScratchDirectory { root in
            let (fileSystem, store, handle, prepared) = try Self.prepare(root)
            var content = prepared
            let writes = fileSystem.dataWrites, syncs = fileSystem.syncs
            // WAL frames: 4,120 bytes each, a commit each (the last chunk regrown every time).
            for round in 0..<200 {
                let frame = patternBytes(4_120, seed: UInt64(100 + round))
                try handle.write(contentsOf: frame, atOffset: UInt64(content.count))
                content.append(frame)
                try handle.synchronize()
                if round % 50 == 49 {
                    #expect(try handle.read(atOffset: 0, upToCount: content.count) == content, "round \(round): read back from the journal")
                }
            }
            #expect(fileSystem.syncs - syncs == 200, "one fsync per commit (its journal's): no checkpoint in between")
            // A chunk whose record is pending (not in the read cache: the middle of the log) is read
            // from the journal alone, one `pread`, not the data file's too.
            let reads = fileSystem.dataReads, middle = content.count / 2
            #expect(try handle.read(atOffset: UInt64(middle), upToCount: 100) == content[middle..<middle + 100])
            #expect(fileSystem.dataReads == reads, "the data file was read for a record the journal holds")
            // A run of such chunks (a WAL frame spans two; here four) too: the journal alone.
            let quarter = content.count / 4
            #expect(try handle.read(atOffset: UInt64(quarter), upToCount: 12_000) == content[quarter..<quarter + 12_000])
            #expect(fileSystem.dataReads == reads, "the data file was read for a run of records the journal holds")
            #expect(fileSystem.dataWrites == writes, "no record in place yet: \(fileSystem.dataWrites - writes) writes")
            // Started over: 32 bytes kept, the chain's records past them dropped.
            try handle.truncate(atOffset: 32)
            try handle.synchronize()
            content = content.prefix(32)
            #expect(fileSystem.dataWrites - writes <= 4, "chunk 0 and the shrink's headers: \(fileSystem.dataWrites - writes) writes")
            #expect(try handle.read(atOffset: 0, upToCount: 100) == content)
            let frame = patternBytes(4_120, seed: 99)
            try handle.write(contentsOf: frame, atOffset: 32)
            try handle.synchronize()
            content.append(frame)
            try Self.expectAfterPowerCut(store, at: root, reads: content)
            withExtendedLifetime(handle) {}
        }
    }

    @Test("a chain's journal file is extended a MiB ahead of it: its commits write over blocks it has, the size committed once per MiB")
    func journalFileGrowsAheadOfTheChain() throws {
        try withScratchDirectory { root in
            let (_, store, handle, prepared) = try Self.prepare(root)
            var content = prepared
            let journalSize = { () -> Int? in
                let files = root.appendingPathComponent("files")
                let names = (try? FileManager.default.contentsOfDirectory(atPath: files.path)) ?? []
                return names.first { $0.hasSuffix(FileJournal.suffix) }.flatMap {
                    (try? FileManager.default.attributesOfItem(atPath: files.appendingPathComponent($0).path))?[.size] as? Int
                }
            }
            let step = CommittedFile.journalStep
            #expect((journalSize() ?? 0) > step, "zeros a step ahead of the first journal")
            var sizes: Set<Int> = []
            for round in 0..<40 {  // some 16.5 KB of journal each: past half a step after ~30
                let patch = patternBytes(1_000, seed: UInt64(200 + round))
                try handle.write(contentsOf: patch, atOffset: UInt64(round % 3 * 16_384))
                content.replaceSubrange(round % 3 * 16_384..<round % 3 * 16_384 + 1_000, with: patch)
                try handle.synchronize()
                sizes.insert(try #require(journalSize()))
            }
            #expect(sizes.count == 2, "the journal file's size changed \(sizes.count - 1) times in 40 commits: \(sizes.sorted())")
            try Self.expectAfterPowerCut(store, at: root, reads: content)  // the zeros after the chain are ignored
            withExtendedLifetime(handle) {}
        }
    }

    @Test("a file moved with records pending in its chain: read back from the old journal file, written in place at the next commit")
    func pendingRecordsFollowAMove() throws {
        try withScratchDirectory { root in
            let (_, store, handle, prepared) = try Self.prepare(root)
            var content = prepared
            for round in 0..<3 {
                let patch = patternBytes(2_000, seed: UInt64(60 + round))
                try handle.write(contentsOf: patch, atOffset: UInt64(1_000 + round * 16_384))
                content.replaceSubrange(1_000 + round * 16_384..<3_000 + round * 16_384, with: patch)
                try handle.synchronize()
            }
            try store.moveItem(atPath: "/f", toPath: "/g")  // the journal copied beside the file, the old one removed
            #expect(try handle.read(atOffset: 0, upToCount: content.count) == content, "pending records read through the old journal's descriptor")
            try handle.write(contentsOf: Data(repeating: 7, count: 5), atOffset: 20)
            content.replaceSubrange(20..<25, with: Data(repeating: 7, count: 5))
            try handle.synchronize()
            #expect(try handle.read(atOffset: 0, upToCount: content.count) == content)
            try Self.expectAfterPowerCut(store, at: root, path: "/g", reads: content)
            withExtendedLifetime(handle) {}
        }
    }

    @Test("the journal the last commit left goes when the file closes, also after the file moved")
    func journalGoesAtCloseAfterAMove() throws {
        try withScratchDirectory { root in
            let (_, store, handle, prepared) = try Self.prepare(root)
            var content = prepared
            try store.createDirectory(atPath: "/d")
            try store.moveItem(atPath: "/f", toPath: "/d/g")  // the store moves the journal along
            try handle.write(contentsOf: Data(repeating: 2, count: 10), atOffset: 200)
            try handle.synchronize()
            content.replaceSubrange(200..<210, with: Data(repeating: 2, count: 10))
            try store.moveItem(atPath: "/d/g", toPath: "/h")
            try handle.close()
            let files = root.appendingPathComponent("files")
            let walker = FileManager.default.enumerator(atPath: files.path)
            let journals = (walker?.allObjects as? [String] ?? []).filter { $0.hasSuffix(FileJournal.suffix) }
            #expect(journals.isEmpty, "journals left: \(journals)")
            #expect(try store.contents(atPath: "/h") == content)
        }
    }
}
