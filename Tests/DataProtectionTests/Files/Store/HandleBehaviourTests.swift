import Foundation
import Testing
@testable import DataProtection

/// `ProtectedFileHandle` behaves like Foundation's `FileHandle`: offsets, reads,
/// writes, seeks, truncation, modes, sharing, closing, and durability across
/// close, reboot and crash against an in-memory model.
@Suite struct HandleBehaviourTests {
    static let digits = Data("0123456789".utf8)

    static func makeFile(_ store: ProtectedStore, _ path: String = "f", _ data: Data = digits,
                         protection: ProtectionClass = .completeUntilFirstUserAuthentication) throws {
        try store.write(data, to: path, protection: ProtectionChoice(protection))
    }

    @Test func readsAdvanceTheOffset() throws {
        try withStore { fixture in
            let store = fixture.store
            try Self.makeFile(store)
            let handle = try store.openFile(atPath: "f", mode: .read)
            #expect(try handle.offset() == 0)
            #expect(try handle.read(upToCount: 3) == Data("012".utf8))
            #expect(try handle.offset() == 3)
            #expect(try handle.read(upToCount: 0) == Data())
            #expect(try handle.offset() == 3)
            #expect(try handle.readToEnd() == Data("3456789".utf8))
            #expect(try handle.offset() == 10)
            #expect(try handle.read(upToCount: 5) == Data(), "at the end: empty")
            #expect(try handle.readToEnd() == Data())
            try handle.seek(toOffset: 8)
            #expect(try handle.read(upToCount: 100) == Data("89".utf8), "fewer bytes at the end")
            try handle.seek(toOffset: 50)
            #expect(try handle.read(upToCount: 1) == Data(), "past the end: empty")
            #expect(try handle.readToEnd() == Data())
            #expect(try handle.offset() == 50)
            #expect(try handle.read(atOffset: 2, upToCount: 3) == Data("234".utf8))
            #expect(try handle.offset() == 50, "positional reads leave the offset")
            expectStoreError(.invalidArgument) { _ = try handle.read(upToCount: -1) }
            #expect(try handle.seekToEnd() == 10)
            #expect(try handle.offset() == 10)
            #expect(try handle.size() == 10)
            try handle.close()
        }
    }

    @Test("reading more than the machine's memory at once is an error, not a crash; pieces still read")
    func hugeReadIsAnError() throws {
        try withStore { fixture in
            let store = fixture.store
            try Self.makeFile(store)
            let handle = try store.openFile(atPath: "f", mode: .update)
            let huge = ProcessInfo.processInfo.physicalMemory * 2
            try handle.truncate(atOffset: huge)  // sparse: zeros past the old end
            try handle.seek(toOffset: 0)
            let error = #expect(throws: DataProtectionError.self) { try handle.readToEnd() }
            #expect(error?.code == .invalidArgument)
            #expect(try handle.offset() == 0, "the failed read moves nothing")
            #expect(try handle.read(upToCount: 12) == Self.digits + Data(count: 2))
            try handle.seek(toOffset: huge - 3)
            #expect(try handle.readToEnd() == Data(count: 3))
            #expect(throws: DataProtectionError.self) { try store.contents(atPath: "f") }
            try handle.truncate(atOffset: 10)
            try handle.close()
            #expect(try store.contents(atPath: "f") == Self.digits)
        }
    }

    @Test func writesAdvanceTheOffsetAndDoNotTruncate() throws {
        try withStore { fixture in
            let store = fixture.store
            try Self.makeFile(store)
            let handle = try store.openFile(atPath: "f", mode: .write)
            try handle.write(contentsOf: Data("ab".utf8))
            #expect(try handle.offset() == 2)
            try handle.seek(toOffset: 5)
            try handle.write(contentsOf: [UInt8(ascii: "X")])
            #expect(try handle.offset() == 6)
            try handle.write(contentsOf: Data("pq".utf8), atOffset: 8)
            #expect(try handle.offset() == 6, "positional writes leave the offset")
            try handle.close()
            #expect(try store.contents(atPath: "f") == Data("ab234X67pq".utf8), "write mode does not truncate")
        }
    }

    @Test func writePastTheEndFillsWithZeros() throws {
        try withStore { fixture in
            let store = fixture.store
            try Self.makeFile(store)
            let handle = try store.openFile(atPath: "f")
            try handle.seek(toOffset: 100)
            #expect(try handle.size() == 10, "seeking does not extend")
            try handle.write(contentsOf: Data("x".utf8))
            #expect(try handle.size() == 101)
            try handle.write(contentsOf: Data("far".utf8), atOffset: 40_000)  // across two chunk boundaries
            #expect(try handle.size() == 40_003)
            var expected = Self.digits + Data(count: 90) + Data("x".utf8)
            expected += Data(count: 40_000 - expected.count) + Data("far".utf8)
            try handle.seek(toOffset: 0)
            #expect(try handle.readToEnd() == expected)
            try handle.close()
            #expect(try store.contents(atPath: "f") == expected)
        }
    }

    @Test func truncateMovesTheOffsetToTheNewSize() throws {
        try withStore { fixture in
            let store = fixture.store
            try Self.makeFile(store, "f", patternBytes(40_000, seed: 1))
            let handle = try store.openFile(atPath: "f")
            try handle.seek(toOffset: 30_000)
            try handle.truncate(atOffset: 20_000)
            #expect(try handle.offset() == 20_000)
            #expect(try handle.size() == 20_000)
            try handle.seek(toOffset: 3)
            try handle.truncate(atOffset: 25_000)  // grows with zeros
            #expect(try handle.offset() == 25_000)
            try handle.write(contentsOf: Data("end".utf8))
            try handle.truncate(atOffset: 0)
            #expect(try handle.offset() == 0)
            #expect(try handle.readToEnd() == Data())
            try handle.truncate(atOffset: 16_385)
            try handle.close()
            #expect(try store.contents(atPath: "f") == Data(count: 16_385), "shrunk data does not come back when grown again")
        }
    }

    @Test func appendModeWritesAtTheEnd() throws {
        try withStore { fixture in
            let store = fixture.store
            try Self.makeFile(store)
            let handle = try store.openFile(atPath: "f", mode: .append)
            try handle.write(contentsOf: Data("A".utf8))
            #expect(try handle.offset() == 11)
            try handle.seek(toOffset: 0)
            try handle.write(contentsOf: Data("B".utf8))
            #expect(try handle.offset() == 12)
            try handle.write(contentsOf: Data("C".utf8), atOffset: 2)
            // Another handle grows the file: appends still go to the (new) end.
            let other = try store.openFile(atPath: "f", mode: .update)
            try other.write(contentsOf: Data("--".utf8), atOffset: 13)
            try handle.write(contentsOf: Data("D".utf8))
            expectStoreError(.notPermitted) { _ = try handle.read(upToCount: 1) }
            try other.close()
            try handle.close()
            #expect(try store.contents(atPath: "f") == Data("0123456789ABC--D".utf8))
        }
    }

    @Test func modesForbidWhatTheyDoNotAllow() throws {
        try withStore { fixture in
            let store = fixture.store
            try Self.makeFile(store)
            let reader = try store.fileHandle(forReadingAtPath: "f")
            #expect(reader.mode == .read)
            expectStoreError(.notPermitted) { try reader.write(contentsOf: Data("x".utf8)) }
            expectStoreError(.notPermitted) { try reader.write(contentsOf: Data("x".utf8), atOffset: 0) }
            expectStoreError(.notPermitted) { try reader.truncate(atOffset: 0) }
            #expect(try reader.offset() == 0, "a refused write leaves the offset")
            let writer = try store.fileHandle(forWritingAtPath: "f")
            #expect(writer.mode == .write)
            expectStoreError(.notPermitted) { _ = try writer.read(upToCount: 1) }
            expectStoreError(.notPermitted) { _ = try writer.readToEnd() }
            expectStoreError(.notPermitted) { _ = try writer.read(atOffset: 0, upToCount: 1) }
            let updater = try store.fileHandle(forUpdatingAtPath: "f")
            #expect(updater.mode == .update)
            try updater.write(contentsOf: Data("u".utf8))
            #expect(try updater.readToEnd() == Data("123456789".utf8))
            for handle in [reader, writer, updater] { try handle.close() }
            #expect(try store.contents(atPath: "f") == Data("u123456789".utf8))
        }
    }

    @Test func openingAndCreating() throws {
        try withStore { fixture in
            let store = fixture.store
            expectStoreError(.fileNotFound) { _ = try store.openFile(atPath: "missing") }
            expectStoreError(.fileNotFound) { _ = try store.fileHandle(forReadingAtPath: "missing") }
            #expect(!store.fileExists(atPath: "missing"))
            try store.createDirectory(atPath: "dir")
            expectStoreError(.isADirectory) { _ = try store.openFile(atPath: "dir", create: true) }
            // create on an existing file: content and class untouched.
            try Self.makeFile(store, "f", Self.digits, protection: .none)
            let existing = try store.openFile(atPath: "f", create: true, protection: .complete)
            #expect(existing.protectionClass == ProtectionClass.none)
            #expect(try existing.readToEnd() == Self.digits)
            try existing.close()
            // A new file is empty, with missing parents made.
            let created = try store.openFile(atPath: "new/deep/file", create: true, protection: .complete)
            #expect(try created.size() == 0)
            #expect(try created.readToEnd() == Data())
            try created.close()
            #expect(try store.contents(atPath: "new/deep/file") == Data())
            #expect(try store.attributesOfItem(atPath: "new/deep/file").protectionClass == .complete)
        }
    }

    @Test func twoHandlesSeeEachOthersSyncedWrites() throws {
        try withStore { fixture in
            let store = fixture.store
            try Self.makeFile(store, "f", patternBytes(50_000, seed: 2))
            var model = patternBytes(50_000, seed: 2)
            let one = try store.openFile(atPath: "f")
            let two = try store.openFile(atPath: "f")
            try one.write(contentsOf: Data("from one".utf8), atOffset: 16_380)
            model.replaceSubrange(16_380..<16_388, with: Data("from one".utf8))
            try one.synchronize()
            #expect(try two.read(atOffset: 0, upToCount: 60_000) == model)
            #expect(try store.contents(atPath: "f") == model)
            try two.write(contentsOf: Data("from two".utf8), atOffset: 49_996)
            model.replaceSubrange(49_996..<50_000, with: Data("from".utf8))
            model.append(Data(" two".utf8))
            try two.synchronize()
            #expect(try one.size() == 50_004)
            try one.seek(toOffset: 49_990)
            #expect(try one.readToEnd() == model.suffix(14))
            try two.truncate(atOffset: 10)
            #expect(try one.size() == 10)
            #expect(try one.read(atOffset: 0, upToCount: 100) == model.prefix(10))
            try one.close()
            #expect(try two.readToEnd() == Data(), "the offset of two is at its truncation point")
            try two.close()
            #expect(try store.contents(atPath: "f") == model.prefix(10))
        }
    }

    @Test func closeTwiceIsHarmlessAndUseAfterCloseFails() throws {
        try withStore { fixture in
            let store = fixture.store
            try Self.makeFile(store)
            let handle = try store.openFile(atPath: "f")
            let other = try store.openFile(atPath: "f", mode: .read)
            try handle.write(contentsOf: Data("Z".utf8))
            try handle.close()
            try handle.close()
            expectStoreError(.handleClosed) { _ = try handle.read(upToCount: 1) }
            expectStoreError(.handleClosed) { _ = try handle.readToEnd() }
            expectStoreError(.handleClosed) { _ = try handle.read(atOffset: 0, upToCount: 1) }
            expectStoreError(.handleClosed) { try handle.write(contentsOf: Data("x".utf8)) }
            expectStoreError(.handleClosed) { try handle.write(contentsOf: Data("x".utf8), atOffset: 0) }
            expectStoreError(.handleClosed) { try handle.truncate(atOffset: 0) }
            expectStoreError(.handleClosed) { try handle.seek(toOffset: 0) }
            expectStoreError(.handleClosed) { _ = try handle.seekToEnd() }
            expectStoreError(.handleClosed) { _ = try handle.offset() }
            expectStoreError(.handleClosed) { _ = try handle.size() }
            expectStoreError(.handleClosed) { try handle.synchronize() }
            // Closing one handle leaves the other open, and what the first wrote visible.
            #expect(try other.readToEnd() == Data("Z123456789".utf8))
            try other.close()
            try other.close()
            #expect(try store.contents(atPath: "f") == Data("Z123456789".utf8))
        }
    }

    /// Dropping the last reference closes the handle (and flushes it).
    @Test func droppedHandleIsFlushed() throws {
        try withStore { fixture in
            let store = fixture.store
            try Self.makeFile(store)
            do {
                let handle = try store.openFile(atPath: "f")
                try handle.write(contentsOf: Data("dropped".utf8))
            }
            #expect(try store.contents(atPath: "f") == Data("dropped789".utf8))
        }
    }

    // MARK: - Model test

    /// How a cycle of the model test ends.
    enum Ending: CaseIterable { case close, reboot, crash, crashAfterSync }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomAccessAcrossReopenRebootAndCrash(_ seed: UInt64) throws {
        try withStore { fixture in
            let store = fixture.store
            var generator = SeededGenerator(seed: seed)
            let protectionClass = ProtectionClass.allCases[Int(seed) % ProtectionClass.allCases.count]
            let handle0 = try store.openFile(atPath: "model", create: true, protection: ProtectionChoice(protectionClass))
            try handle0.close()
            var durable = Data()  // the content at the last synchronize/close
            for cycle in 0..<8 {
                let ending = Ending.allCases[(cycle + Int(seed)) % Ending.allCases.count]
                let handle = try store.openFile(atPath: "model", mode: .update)
                #expect(try handle.readToEnd() == durable, "cycle \(cycle): reopened")
                var model = durable
                // Every state since the last durable point: what a crash may leave.
                var candidates = [durable]
                for step in 0..<30 {
                    let roll = Int.random(in: 0..<10, using: &generator)
                    switch roll {
                    case 0..<5:
                        let offset = Int.random(in: 0...(model.count + 20_000), using: &generator)
                        let data = patternBytes(Int.random(in: 1...40_000, using: &generator), seed: generator.next())
                        if roll < 2 {
                            try handle.seek(toOffset: UInt64(offset))
                            try handle.write(contentsOf: data)
                            #expect(try handle.offset() == UInt64(offset + data.count))
                        } else {
                            try handle.write(contentsOf: data, atOffset: UInt64(offset))
                        }
                        if offset > model.count { model.append(Data(count: offset - model.count)) }
                        let end = offset + data.count
                        if end > model.count { model.append(Data(count: end - model.count)) }
                        model.replaceSubrange(offset..<end, with: data)
                        candidates.append(model)
                    case 5:
                        let size = Int.random(in: 0...(model.count + 20_000), using: &generator)
                        try handle.truncate(atOffset: UInt64(size))
                        #expect(try handle.offset() == UInt64(size))
                        if size < model.count { model.removeSubrange(size...) } else { model.append(Data(count: size - model.count)) }
                        candidates.append(model)
                    case 6:
                        try handle.synchronize()
                        durable = model
                        candidates = [model]
                        // Another handle sees the synced state.
                        let reader = try store.openFile(atPath: "model", mode: .read)
                        #expect(try reader.readToEnd() == model, "cycle \(cycle) step \(step): a second handle after sync")
                        try reader.close()
                    default:
                        let start = Int.random(in: 0...model.count, using: &generator)
                        let count = Int.random(in: 0...50_000, using: &generator)
                        try handle.seek(toOffset: UInt64(start))
                        let got = try handle.read(upToCount: count)
                        #expect(got == model.subdata(in: start..<min(model.count, start + count)), "cycle \(cycle) step \(step)")
                        #expect(try handle.offset() == UInt64(start + got.count))
                    }
                    #expect(try handle.size() == UInt64(model.count))
                }
                switch ending {
                case .close:
                    try handle.close()
                    durable = model
                case .reboot:
                    try fixture.device.reboot()  // flushes open handles
                    expectStoreError(.handleClosed) { _ = try handle.offset() }
                    try fixture.unlock()
                    durable = model
                case .crash, .crashAfterSync:
                    if ending == .crashAfterSync {
                        try handle.synchronize()
                        durable = model
                        candidates = [model]
                    }
                    try fixture.device.crash()
                    expectStoreError(.handleClosed) { _ = try handle.read(upToCount: 1) }
                    try fixture.unlock()
                    let after = try store.contents(atPath: "model")
                    let index = candidates.firstIndex(of: after)
                    #expect(index != nil, "cycle \(cycle): after a crash the file holds its last synced state (possibly plus unsynced writes), got \(after.count) bytes")
                    if let index {
                        durable = candidates[index]
                        if index != 0 {
                            // Allowed by semantics.md ("possibly plus unsynced handle writes"): the
                            // store flushed on its own (cache full, or a shrinking truncate).
                            model = durable
                        }
                    } else {
                        durable = after
                    }
                }
                #expect(try store.contents(atPath: "model") == durable, "cycle \(cycle) after \(ending)")
                #expect(try store.attributesOfItem(atPath: "model").size == UInt64(durable.count))
            }
        }
    }
}
