import Foundation
import Testing
@testable import DataProtection

/// `fileExists` answers from a memo while nothing changes the name space (a database asks
/// for its hot journal at every read transaction): after every kind of change, through
/// every entry point, the answer must be the disk's.
@Suite struct NamespaceLockTests {
    @Test("fileExists is right after every change: writes, handles, directories, moves, copies, removals, class changes, erase")
    func existenceFollowsEveryChange() throws {
        try withStore { fixture in
            let store = fixture.store
            /// Asks twice (the second answer comes from the memo) and compares with `expected`.
            func expectExisting(_ expected: [String: Bool?], _ when: String, sourceLocation: SourceLocation = #_sourceLocation) {
                for _ in 0..<2 {
                    for (path, kind) in expected {
                        var isDirectory = false
                        let exists = store.fileExists(atPath: path, isDirectory: &isDirectory)
                        // nil: missing; false: a file; true: a directory.
                        #expect(exists == (kind != nil) && (!exists || isDirectory == kind), "\(path) \(when)", sourceLocation: sourceLocation)
                    }
                }
            }
            expectExisting(["a": nil, "d": nil, "d/x": nil], "at first")
            try store.write(Data("a".utf8), to: "a")
            expectExisting(["a": false, "d": nil], "after a write")
            let handle = try store.openFile(atPath: "d/x", create: true)
            expectExisting(["d": true, "d/x": false], "after a handle created a file and its directory")
            try store.moveItem(atPath: "d/x", toPath: "d/y")
            expectExisting(["d/x": nil, "d/y": false], "after a move of an open file")
            try handle.close()
            try store.moveItem(atPath: "d", toPath: "e")
            expectExisting(["d": nil, "d/y": nil, "e": true, "e/y": false], "after a directory moved")
            try store.createDirectory(atPath: "d2")
            expectExisting(["d2": true, "d2/z": nil], "after createDirectory")
            try store.copyItem(atPath: "e/y", toPath: "d2/z")
            expectExisting(["d2": true, "d2/z": false], "after a copy")
            try store.createDirectory(atPath: "f/g")
            expectExisting(["f": true, "f/g": true], "after createDirectory")
            try store.removeItem(atPath: "e/y")
            expectExisting(["e": true, "e/y": nil], "after a file removed")
            try store.removeItem(atPath: "e")
            expectExisting(["e": nil, "e/y": nil], "after a directory removed")
            try store.write(Data("n".utf8), to: "plain", protection: ProtectionChoice.none)
            try store.setProtectionClass(.complete, ofItemAtPath: "plain")  // re-encrypted, renamed over
            expectExisting(["plain": false], "after a class change that rewrote the file")
            // A failed change: creating a complete file while locked writes nothing.
            try fixture.lock()
            expectStoreError(.protectedDataUnavailable) { try store.write(Data(), to: "locked", protection: .complete) }
            expectExisting(["locked": nil, "a": false], "after a refused write")
            try fixture.unlock()
            // Through an asynchronous stream too (the store's writer, committed by a rename).
            try store.write(Data(repeating: 1, count: 100_000), to: "a")
            expectExisting(["a": false], "after a replacement")
            try store.removeItem(atPath: "a")
            expectExisting(["a": nil], "after a removal")
            try store.device.erase()
            expectExisting(["plain": nil, "d2": nil, "d2/z": nil, "f": nil], "after an erase")
        }
    }

    @Test("the memo is bounded and starts over when full")
    func memoIsBounded() throws {
        try withStore { fixture in
            let store = fixture.store
            try store.write(Data("x".utf8), to: "kept")
            for index in 0..<(NamespaceLock.memoLimit * 2 + 3) {
                #expect(!store.fileExists(atPath: "missing-\(index)"))
                #expect(store.fileExists(atPath: "kept"))
            }
        }
    }
}
