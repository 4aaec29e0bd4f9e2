import Foundation
import Testing
@testable import DataProtection

/// Every cell of semantics.md's class × state table, for every operation on
/// content, plus the rules around it: class B, default classes, metadata in
/// every state, class changes, durability across lock, reboot, crash and
/// erase, and the precedence of error codes.
@Suite struct ClassStateTableTests {
    static let grace: Duration = .seconds(10)
    static let inactivity: Duration = .seconds(3600)

    /// Moves an unlocked device into `state`.
    static func enter(_ state: TableState, _ fixture: StoreFixture) throws {
        switch state {
        case .booted: try fixture.device.reboot()
        case .unlocked: break
        case .lockedInGrace: try fixture.lock(after: grace / 2)
        case .locked: try fixture.lock(after: grace)  // the keys go at the very instant lock + grace
        case .lockedInactive: try fixture.lock(after: inactivity)
        }
        #expect(fixture.device.state == (state == .booted ? .booted : state == .unlocked ? .unlocked : .locked))
    }

    struct Cell: Sendable, CustomTestStringConvertible {
        let protectionClass: ProtectionClass
        let state: TableState
        var testDescription: String { "\(protectionClass.letter) \(state.rawValue)" }
    }

    static let cells = ProtectionClass.allCases.flatMap { protectionClass in
        TableState.allCases.map { Cell(protectionClass: protectionClass, state: $0) }
    }

    /// Checks one outcome against the table: success when `allowed`, else `protectedDataUnavailable`.
    static func check<R>(
        _ allowed: Bool, _ what: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
    ) -> R? {
        switch outcome(body) {
        case .success(let value):
            #expect(allowed, "\(what): succeeded, the table says protectedDataUnavailable", sourceLocation: sourceLocation)
            return value
        case .failure(let error):
            #expect(!allowed && error.code == .protectedDataUnavailable,
                    "\(what): \(error), the table says \(allowed ? "success" : "protectedDataUnavailable")", sourceLocation: sourceLocation)
            return nil
        }
    }

    // MARK: - The table

    @Test(arguments: cells)
    func cell(_ cell: Cell) throws {
        try withStore(grace: Self.grace, inactivity: Self.inactivity) { fixture in
            let store = fixture.store
            let protectionClass = cell.protectionClass
            let state = cell.state
            let opens = protectionClass.opensExisting(in: state)
            let creates = protectionClass.createsNew(in: state)
            let handles = protectionClass.handleWorks(in: state)

            // Created in the current boot (for `booted`: in the boot before).
            let original = patternBytes(20_000, seed: 1)  // two chunks
            let replacement = patternBytes(17_000, seed: 2)
            let payload = patternBytes(16_500, seed: 3)
            for name in ["existing", "existingRW", "replaceGiven", "replaceKept", "preopened"] {
                try store.write(original, to: name, protection: ProtectionChoice(protectionClass))
            }
            // Handles opened before the state change (meaningless across a reboot, which closes them).
            var update: ProtectedFileHandle?
            var reader: ProtectedFileHandle?
            var preopened = original
            if state != .booted {
                update = try store.openFile(atPath: "preopened", mode: .update)
                reader = try store.openFile(atPath: "preopened", mode: .read)
                try update!.write(contentsOf: Data("before the lock".utf8), atOffset: 100)  // not synced
                preopened.replaceSubrange(100..<115, with: Data("before the lock".utf8))
                _ = try reader!.read(upToCount: 10)
            }

            try Self.enter(state, fixture)

            // Metadata works in every state.
            let attributes = try store.attributesOfItem(atPath: "existing")
            #expect(attributes.protectionClass == protectionClass)
            #expect(attributes.size == UInt64(original.count))
            #expect(try store.contentsOfDirectory(atPath: "/") == ["existing", "existingRW", "preopened", "replaceGiven", "replaceKept"])

            // Open an existing (closed) file for reading; whole-file read.
            if let handle = Self.check(opens, "open existing for reading", { try store.openFile(atPath: "existing", mode: .read) }) {
                #expect(try handle.readToEnd() == original)
                try handle.close()
            }
            if let data = Self.check(opens, "contents(atPath:)", { try store.contents(atPath: "existing") }) {
                #expect(data == original)
            }

            // Read and write through a new handle on an existing file.
            var existingRW = original
            if let handle = Self.check(opens, "open existing for update", { try store.openFile(atPath: "existingRW", mode: .update) }) {
                try handle.seek(toOffset: 16_380)
                try handle.write(contentsOf: Data("across".utf8))
                existingRW.replaceSubrange(16_380..<16_386, with: Data("across".utf8))
                try handle.seek(toOffset: 16_370)
                #expect(try handle.read(upToCount: 30) == existingRW.subdata(in: 16_370..<16_400))
                try handle.close()
            }

            // Create through openFile, then read and write through that handle.
            var createdByOpen: Data?
            if let handle = Self.check(creates, "openFile(create: true)", {
                try store.openFile(atPath: "createdByOpen", mode: .update, create: true, protection: ProtectionChoice(protectionClass))
            }) {
                #expect(handle.protectionClass == protectionClass)
                try handle.write(contentsOf: payload)
                try handle.seek(toOffset: 0)
                #expect(try handle.readToEnd() == payload)
                #expect(try handle.read(atOffset: 16_000, upToCount: 1_000) == payload.subdata(in: 16_000..<16_500))
                try handle.synchronize()
                // While the handle is open, its key is in memory: whole-file reads and more handles work (class B too).
                #expect(try store.contents(atPath: "createdByOpen") == payload)
                let second = try store.openFile(atPath: "createdByOpen", mode: .read)
                #expect(try second.readToEnd() == payload)
                try second.close()
                try handle.close()
                createdByOpen = payload
                // Closed: reopening follows the table.
                if let data = Self.check(opens, "reopen a file created in this state", { try store.contents(atPath: "createdByOpen") }) {
                    #expect(data == payload)
                }
                _ = Self.check(opens, "reopen a handle on a file created in this state") {
                    try store.openFile(atPath: "createdByOpen", mode: .read).close()
                }
            } else {
                #expect(!store.fileExists(atPath: "createdByOpen"), "a failed create leaves nothing")
            }

            // Create through a whole-file write.
            var createdByWrite: Data?
            if Self.check(creates, "write(_:to:protection:) new", { try store.write(payload, to: "createdByWrite", protection: ProtectionChoice(protectionClass)) }) != nil {
                createdByWrite = payload
                #expect(try store.attributesOfItem(atPath: "createdByWrite").protectionClass == protectionClass)
                #expect(try store.attributesOfItem(atPath: "createdByWrite").size == UInt64(payload.count))
                if let data = Self.check(opens, "read a file written in this state", { try store.contents(atPath: "createdByWrite") }) {
                    #expect(data == payload)
                }
            } else {
                #expect(!store.fileExists(atPath: "createdByWrite"), "a failed write leaves nothing")
            }

            // Replace an existing file, with the class given and without.
            let replacedGiven = Self.check(creates, "write(_:to:protection:) replacing") {
                try store.write(replacement, to: "replaceGiven", protection: ProtectionChoice(protectionClass))
            } != nil
            let replacedKept = Self.check(creates, "write(_:to:) replacing, no class") {
                try store.write(replacement, to: "replaceKept")
            } != nil
            #expect(try store.attributesOfItem(atPath: "replaceGiven").protectionClass == protectionClass)
            #expect(try store.attributesOfItem(atPath: "replaceKept").protectionClass == protectionClass)

            // Handles opened before the state change.
            if let update, let reader {
                if let data = Self.check(handles, "read through a handle opened earlier", { try update.read(atOffset: 0, upToCount: 200) }) {
                    #expect(data == preopened.prefix(200))
                }
                if Self.check(handles, "write through a handle opened earlier", {
                    try update.write(contentsOf: Data("during".utf8), atOffset: 16_383)
                }) != nil {
                    preopened.replaceSubrange(16_383..<16_389, with: Data("during".utf8))
                }
                if let data = Self.check(handles, "read through a read handle opened earlier", { try reader.readToEnd() }) {
                    #expect(data == preopened.dropFirst(10))
                }
                _ = Self.check(handles, "truncate through a handle opened earlier") { try update.truncate(atOffset: UInt64(preopened.count)) }
                // Key-free operations always work.
                try update.seek(toOffset: 7)
                #expect(try update.offset() == 7)
                #expect(try update.size() == UInt64(preopened.count))
                try update.synchronize()
                #expect(try reader.seekToEnd() == UInt64(preopened.count))
                // One more handle, and a whole-file read, while these are open.
                _ = Self.check(handles, "open another handle while one is open") {
                    try store.openFile(atPath: "preopened", mode: .read).close()
                }
                if let data = Self.check(handles, "contents(atPath:) while a handle is open", { try store.contents(atPath: "preopened") }) {
                    #expect(data == preopened)
                }
            }

            // Unlock: everything is back, the same handles included.
            try fixture.unlock()
            if let update, let reader {
                #expect(try update.read(atOffset: 0, upToCount: preopened.count) == preopened, "the same handle works after unlock")
                try update.write(contentsOf: Data("after".utf8), atOffset: 1)
                preopened.replaceSubrange(1..<6, with: Data("after".utf8))
                try update.synchronize()
                try reader.seek(toOffset: 0)
                #expect(try reader.readToEnd() == preopened)
                try update.close()
                try reader.close()
            }
            #expect(try store.contents(atPath: "existing") == original)
            #expect(try store.contents(atPath: "existingRW") == existingRW)
            #expect(try store.contents(atPath: "preopened") == preopened)
            #expect(try store.contents(atPath: "replaceGiven") == (replacedGiven ? replacement : original))
            #expect(try store.contents(atPath: "replaceKept") == (replacedKept ? replacement : original))
            if let createdByOpen { #expect(try store.contents(atPath: "createdByOpen") == createdByOpen) }
            if let createdByWrite { #expect(try store.contents(atPath: "createdByWrite") == createdByWrite) }
            for name in try store.contentsOfDirectory(atPath: "/") {
                #expect(try store.attributesOfItem(atPath: name).protectionClass == protectionClass, "\(name)")
            }
        }
    }

    /// With no grace period the keys go at the instant of `lock`.
    @Test(arguments: ProtectionClass.allCases)
    func lockWithoutGrace(_ protectionClass: ProtectionClass) throws {
        try withStore { fixture in
            let store = fixture.store
            let data = patternBytes(5_000, seed: 4)
            try store.write(data, to: "f", protection: ProtectionChoice(protectionClass))
            let handle = try store.openFile(atPath: "f")
            try fixture.lock()
            let opens = protectionClass.opensExisting(in: .locked)
            let works = protectionClass.handleWorks(in: .locked)
            _ = Self.check(works, "contents while a handle is open") { try store.contents(atPath: "f") }
            if let read = Self.check(works, "handle read", { try handle.read(upToCount: 100) }) { #expect(read == data.prefix(100)) }
            _ = Self.check(protectionClass.createsNew(in: .locked), "create") { try store.write(data, to: "g", protection: ProtectionChoice(protectionClass)) }
            try handle.close()
            _ = Self.check(opens, "reopen") { try store.openFile(atPath: "f").close() }
        }
    }

    /// Unlocking inside the grace period keeps the keys: nothing was discarded, nothing changes later.
    @Test func unlockInsideGraceKeepsKeys() throws {
        try withStore(grace: Self.grace) { fixture in
            let store = fixture.store
            try store.write(Data("a".utf8), to: "a", protection: .complete)
            let handle = try store.openFile(atPath: "a")
            try fixture.lock(after: .seconds(9))
            try fixture.unlock()
            fixture.clock.advance(by: .seconds(60))
            #expect(try handle.readToEnd() == Data("a".utf8))
            #expect(try store.contents(atPath: "a") == Data("a".utf8))
            try handle.close()
        }
    }

    // MARK: - Class B

    @Test(arguments: [TableState.booted, .locked, .lockedInactive])
    func classBCreatedWhileLocked(_ state: TableState) throws {
        try withStore(grace: Self.grace, inactivity: Self.inactivity) { fixture in
            let store = fixture.store
            try Self.enter(state, fixture)
            let data = patternBytes(40_000, seed: 5)
            let handle = try store.openFile(atPath: "dir/b", create: true, protection: .completeUnlessOpen)
            try handle.write(contentsOf: data)
            try handle.seek(toOffset: 0)
            #expect(try handle.readToEnd() == data)
            try handle.synchronize()
            // A whole-file read, and another handle, while the first is open.
            #expect(try store.contents(atPath: "dir/b") == data)
            let other = try store.openFile(atPath: "dir/b", mode: .read)
            #expect(try other.read(upToCount: 10) == data.prefix(10))
            try other.close()
            try handle.close()
            expectStoreError(.protectedDataUnavailable) { _ = try store.contents(atPath: "dir/b") }
            expectStoreError(.protectedDataUnavailable) { _ = try store.openFile(atPath: "dir/b", mode: .read) }
            #expect(try store.attributesOfItem(atPath: "dir/b").size == UInt64(data.count))
            // Replace it while locked: works, keeps B when no class is given.
            let replacement = patternBytes(3, seed: 6)
            try store.write(replacement, to: "dir/b")
            #expect(try store.attributesOfItem(atPath: "dir/b").protectionClass == .completeUnlessOpen)
            expectStoreError(.protectedDataUnavailable) { _ = try store.contents(atPath: "dir/b") }
            try fixture.unlock()
            #expect(try store.contents(atPath: "dir/b") == replacement)
        }
    }

    /// A class B file with a handle open while locked can change class (the handle holds the old key).
    @Test func classBOpenHandleAllowsSetClassWhileLocked() throws {
        try withStore { fixture in
            let store = fixture.store
            let data = patternBytes(1_000, seed: 7)
            try store.write(data, to: "b", protection: .completeUnlessOpen)
            let handle = try store.openFile(atPath: "b", mode: .read)
            try fixture.lock()
            try store.setProtectionClass(.completeUntilFirstUserAuthentication, ofItemAtPath: "b")
            #expect(try store.attributesOfItem(atPath: "b").protectionClass == .completeUntilFirstUserAuthentication)
            try handle.close()
            #expect(try store.contents(atPath: "b") == data, "class C is readable while locked")
        }
    }

    // MARK: - Classes of new and replaced files

    @Test func newFilesTakeTheDirectoryClassElseTheDefault() throws {
        try withStore { fixture in
            let store = fixture.store
            try store.createDirectory(atPath: "A", protection: .complete)
            try store.createDirectory(atPath: "plain")
            #expect(try store.attributesOfItem(atPath: "A").protectionClass == .complete)
            #expect(try store.attributesOfItem(atPath: "plain").protectionClass == .completeUntilFirstUserAuthentication)  // the class its new files take (semantics.md)
            try store.write(Data("1".utf8), to: "A/written")
            try store.openFile(atPath: "A/opened", create: true).close()
            try store.write(Data("2".utf8), to: "A/deep/er/file")  // intermediate directories inherit
            try store.createDirectory(atPath: "A/sub")
            try store.write(Data("3".utf8), to: "root")
            try store.write(Data("4".utf8), to: "plain/file")
            try store.write(Data("5".utf8), to: "A/given", protection: .none)
            try store.write(Data("6".utf8), to: "A/option", options: [.noFileProtection])
            try store.write(Data("7".utf8), to: "option", options: [.completeFileProtection])
            let expected: [String: ProtectionClass?] = [
                "A/written": .complete, "A/opened": .complete, "A/deep/er/file": .complete, "A/deep": .complete,
                "A/sub": .complete, "root": .completeUntilFirstUserAuthentication,
                "plain/file": .completeUntilFirstUserAuthentication, "A/given": ProtectionClass.none,
                "A/option": ProtectionClass.none, "option": .complete,
            ]
            for (path, protectionClass) in expected {
                #expect(try store.attributesOfItem(atPath: path).protectionClass == protectionClass, "\(path)")
            }
            // Replacing without a class keeps the file's class, not the directory's.
            try store.write(Data("8".utf8), to: "A/given")
            #expect(try store.attributesOfItem(atPath: "A/given").protectionClass == ProtectionClass.none)
            // A directory's class is only a default for what comes later.
            try store.setProtectionClass(.completeWhenUserInactive, ofItemAtPath: "A")
            #expect(try store.attributesOfItem(atPath: "A/written").protectionClass == .complete)
            #expect(try store.attributesOfItem(atPath: "A/sub").protectionClass == .complete)
            try store.write(Data("9".utf8), to: "A/later")
            #expect(try store.attributesOfItem(atPath: "A/later").protectionClass == .completeWhenUserInactive)
            // While locked: a class B directory takes new files; a class A one cannot.
            try store.createDirectory(atPath: "B", protection: .completeUnlessOpen)
            try store.setProtectionClass(.complete, ofItemAtPath: "A")
            try fixture.lock()
            try store.write(Data("b".utf8), to: "B/new")
            #expect(try store.attributesOfItem(atPath: "B/new").protectionClass == .completeUnlessOpen)
            try store.openFile(atPath: "B/opened", create: true).close()
            #expect(try store.attributesOfItem(atPath: "B/opened").protectionClass == .completeUnlessOpen)
            expectStoreError(.protectedDataUnavailable) { try store.write(Data("a".utf8), to: "A/new") }
            expectStoreError(.protectedDataUnavailable) { _ = try store.openFile(atPath: "A/new2", create: true) }
            #expect(!store.fileExists(atPath: "A/new"))
            #expect(!store.fileExists(atPath: "A/new2"))
        }
    }

    @Test(arguments: ProtectionClass.allCases)
    func writeWithoutClassKeepsTheReplacedClass(_ protectionClass: ProtectionClass) throws {
        try withStore { fixture in
            let store = fixture.store
            for directoryClass in ProtectionClass.allCases {
                let path = "\(directoryClass.letter)/f"
                try store.createDirectory(atPath: directoryClass.letter, protection: ProtectionChoice(directoryClass))
                try store.write(Data("old".utf8), to: path, protection: ProtectionChoice(protectionClass))
                try store.write(Data("new".utf8), to: path)
                #expect(try store.attributesOfItem(atPath: path).protectionClass == protectionClass)
                #expect(try store.contents(atPath: path) == Data("new".utf8))
                let streamed = [Data("str".utf8), Data("eamed".utf8)]
                var iterator = streamed.makeIterator()
                try store.write(to: path) { iterator.next() }
                #expect(try store.attributesOfItem(atPath: path).protectionClass == protectionClass)
                #expect(try store.contents(atPath: path) == Data("streamed".utf8))
            }
        }
    }

    // MARK: - Metadata in every state

    @Test(arguments: TableState.allCases)
    func metadataWorksInEveryState(_ state: TableState) throws {
        try withStore(grace: Self.grace, inactivity: Self.inactivity) { fixture in
            let store = fixture.store
            var contents: [String: Data] = [:]
            for (index, protectionClass) in ProtectionClass.allCases.enumerated() {
                let data = patternBytes(1_000 * (index + 1), seed: UInt64(index))
                try store.write(data, to: "files/\(protectionClass.letter)", protection: ProtectionChoice(protectionClass))
                contents[protectionClass.letter] = data
            }
            try store.createDirectory(atPath: "dirs/full/inner", protection: .complete)
            try Self.enter(state, fixture)

            let letters = ProtectionClass.allCases.map(\.letter).sorted()
            #expect(try store.contentsOfDirectory(atPath: "/") == ["dirs", "files"])
            #expect(try store.contentsOfDirectory(atPath: "files") == letters)
            for (index, protectionClass) in ProtectionClass.allCases.enumerated() {
                let attributes = try store.attributesOfItem(atPath: "files/\(protectionClass.letter)")
                #expect(attributes.type == .file)
                #expect(attributes.size == UInt64(1_000 * (index + 1)))
                #expect(attributes.protectionClass == protectionClass)
                #expect(store.fileExists(atPath: "files/\(protectionClass.letter)"))
            }
            var isDirectory = false
            #expect(store.fileExists(atPath: "dirs/full", isDirectory: &isDirectory) && isDirectory)
            #expect(try store.attributesOfItem(atPath: "dirs/full/inner").protectionClass == .complete)

            // mkdir, mv (files of every class, and a directory), rm.
            try store.createDirectory(atPath: "moved", protection: .completeWhenUserInactive)
            #expect(try store.attributesOfItem(atPath: "moved").protectionClass == .completeWhenUserInactive)
            for protectionClass in ProtectionClass.allCases {
                try store.moveItem(atPath: "files/\(protectionClass.letter)", toPath: "moved/\(protectionClass.letter)-renamed")
                #expect(try store.attributesOfItem(atPath: "moved/\(protectionClass.letter)-renamed").protectionClass == protectionClass)
            }
            #expect(try store.contentsOfDirectory(atPath: "files") == [])
            #expect(try store.contentsOfDirectory(atPath: "moved") == letters.map { "\($0)-renamed" })
            expectStoreError(.fileExists) { try store.moveItem(atPath: "moved/A-renamed", toPath: "moved/B-renamed") }
            expectStoreError(.directoryNotEmpty) { try store.removeItem(atPath: "dirs/full") }
            try store.moveItem(atPath: "dirs/full", toPath: "full")
            #expect(try store.contentsOfDirectory(atPath: "full") == ["inner"])
            try store.removeItem(atPath: "full/inner")
            try store.removeItem(atPath: "full")
            try store.removeItem(atPath: "files")
            try store.removeItem(atPath: "moved/D-renamed")
            try store.removeItem(atPath: "moved/A-renamed")
            #expect(try store.contentsOfDirectory(atPath: "/") == ["dirs", "moved"])
            #expect(try store.contentsOfDirectory(atPath: "moved") == ["B-renamed", "C-renamed", "CX-renamed"])

            // After unlock the moved files hold their content.
            try fixture.unlock()
            for letter in ["B", "C", "CX"] {
                #expect(try store.contents(atPath: "moved/\(letter)-renamed") == contents[letter])
            }
        }
    }

    // MARK: - Changing classes

    @Test(arguments: TableState.allCases)
    func setClassNeedsOldAndNewKeys(_ state: TableState) throws {
        try withStore(grace: Self.grace, inactivity: Self.inactivity) { fixture in
            let store = fixture.store
            let classes = ProtectionClass.allCases
            func path(_ old: ProtectionClass, _ new: ProtectionClass) -> String { "\(old.letter)-to-\(new.letter)" }
            func data(_ old: ProtectionClass, _ new: ProtectionClass) -> Data {
                patternBytes(17_000, seed: UInt64(classes.firstIndex(of: old)! * 10 + classes.firstIndex(of: new)!))
            }
            for old in classes {
                for new in classes { try store.write(data(old, new), to: path(old, new), protection: ProtectionChoice(old)) }
            }
            try Self.enter(state, fixture)
            var changed: [String: Bool] = [:]
            for old in classes {
                for new in classes {
                    let allowed = old.opensExisting(in: state) && new.createsNew(in: state)
                    changed[path(old, new)] = Self.check(allowed, "set-class \(path(old, new))") {
                        try store.setProtectionClass(new, ofItemAtPath: path(old, new))
                    } != nil
                    let now = try store.attributesOfItem(atPath: path(old, new)).protectionClass
                    #expect(now == (changed[path(old, new)]! ? new : old), "\(path(old, new)): stat shows \(String(describing: now))")
                }
            }
            try fixture.unlock()
            for old in classes {
                for new in classes {
                    #expect(try store.contents(atPath: path(old, new)) == data(old, new), "\(path(old, new)): content unchanged")
                }
            }
            // The change survives a reboot (it is durable and the header is rewrapped).
            try fixture.device.reboot()
            try fixture.unlock()
            for old in classes {
                for new in classes {
                    let expected = changed[path(old, new)]! ? new : old
                    #expect(try store.attributesOfItem(atPath: path(old, new)).protectionClass == expected)
                    #expect(try store.contents(atPath: path(old, new)) == data(old, new))
                }
            }
        }
    }

    /// After a change to A the file follows A's rules (and after a change away from A, the new class's).
    @Test func setClassChangesTheRules() throws {
        try withStore { fixture in
            let store = fixture.store
            try store.write(Data("x".utf8), to: "toA", protection: .none)
            try store.write(Data("y".utf8), to: "fromA", protection: .complete)
            try store.setProtectionClass(.complete, ofItemAtPath: "toA")
            try store.setProtectionClass(ProtectionClass.none, ofItemAtPath: "fromA")
            try fixture.lock()
            expectStoreError(.protectedDataUnavailable) { _ = try store.contents(atPath: "toA") }
            #expect(try store.contents(atPath: "fromA") == Data("y".utf8))
            try fixture.device.reboot()
            #expect(try store.contents(atPath: "fromA") == Data("y".utf8), "class D before first unlock")
        }
    }

    // MARK: - Durability across lock, reboot, crash, erase

    @Test(arguments: [ProtectionClass.complete, .completeWhenUserInactive])
    func acknowledgedWritesSurviveTheLock(_ protectionClass: ProtectionClass) throws {
        try withStore(inactivity: Self.inactivity) { fixture in
            let store = fixture.store
            let data = patternBytes(50_000, seed: 8)
            let handle = try store.openFile(atPath: "f", create: true, protection: ProtectionChoice(protectionClass))
            try handle.write(contentsOf: data)  // not synced
            try fixture.lock(after: protectionClass == .complete ? .zero : Self.inactivity)
            expectStoreError(.protectedDataUnavailable) { _ = try handle.read(atOffset: 0, upToCount: 1) }
            expectStoreError(.protectedDataUnavailable) { try handle.write(contentsOf: Data("lost".utf8)) }
            try fixture.unlock()
            let other = try store.openFile(atPath: "f", mode: .read)
            #expect(try other.readToEnd() == data)
            try other.close()
            try handle.close()
        }
    }

    /// The flush at key discard is durable: a crash while locked loses nothing acknowledged.
    @Test(arguments: [ProtectionClass.complete, .completeWhenUserInactive])
    func writesFlushedAtLockSurviveACrash(_ protectionClass: ProtectionClass) throws {
        try withStore(grace: Self.grace, inactivity: Self.inactivity) { fixture in
            let store = fixture.store
            let first = patternBytes(30_000, seed: 9)
            try store.write(first, to: "f", protection: ProtectionChoice(protectionClass))
            let handle = try store.openFile(atPath: "f")
            try handle.write(contentsOf: Data("before".utf8), atOffset: 20_000)
            try fixture.lock(after: Self.grace / 2)
            try handle.write(contentsOf: Data("in the grace".utf8), atOffset: 29_995)  // acknowledged in the grace period
            fixture.clock.advance(by: protectionClass == .complete ? Self.grace : Self.inactivity)
            expectStoreError(.protectedDataUnavailable) { _ = try handle.readToEnd() }
            try fixture.device.crash()
            expectStoreError(.handleClosed) { _ = try handle.readToEnd() }
            try fixture.unlock()
            var expected = first
            expected.replaceSubrange(20_000..<20_006, with: Data("before".utf8))
            expected.replaceSubrange(29_995..<30_000, with: Data("in the grace".utf8).prefix(5))
            expected.append(Data("in the grace".utf8).dropFirst(5))
            #expect(try store.contents(atPath: "f") == expected)
        }
    }

    @Test(arguments: [TableState.unlocked, .locked])
    func rebootClosesHandlesAndFlushes(_ state: TableState) throws {
        try withStore(grace: Self.grace, inactivity: Self.inactivity) { fixture in
            let store = fixture.store
            var handles: [(ProtectionClass, ProtectedFileHandle)] = []
            for protectionClass in ProtectionClass.allCases {
                let handle = try store.openFile(atPath: protectionClass.letter, create: true, protection: ProtectionChoice(protectionClass))
                try handle.write(contentsOf: Data("unsynced \(protectionClass.letter)".utf8))
                handles.append((protectionClass, handle))
            }
            try Self.enter(state, fixture)
            try fixture.device.reboot()
            #expect(fixture.device.state == .booted)
            for (protectionClass, handle) in handles {
                let label = protectionClass.letter
                expectStoreError(.handleClosed, label) { _ = try handle.read(upToCount: 1) }
                expectStoreError(.handleClosed, label) { _ = try handle.readToEnd() }
                expectStoreError(.handleClosed, label) { _ = try handle.read(atOffset: 0, upToCount: 1) }
                expectStoreError(.handleClosed, label) { try handle.write(contentsOf: Data("x".utf8)) }
                expectStoreError(.handleClosed, label) { try handle.write(contentsOf: Data("x".utf8), atOffset: 0) }
                expectStoreError(.handleClosed, label) { try handle.truncate(atOffset: 0) }
                expectStoreError(.handleClosed, label) { try handle.seek(toOffset: 0) }
                expectStoreError(.handleClosed, label) { _ = try handle.seekToEnd() }
                expectStoreError(.handleClosed, label) { _ = try handle.offset() }
                expectStoreError(.handleClosed, label) { _ = try handle.size() }
                expectStoreError(.handleClosed, label) { try handle.synchronize() }
                try handle.close()  // harmless
            }
            #expect(try store.contents(atPath: "D") == Data("unsynced D".utf8), "class D before first unlock")
            try fixture.unlock()
            for protectionClass in ProtectionClass.allCases {
                #expect(try store.contents(atPath: protectionClass.letter) == Data("unsynced \(protectionClass.letter)".utf8))
            }
        }
    }

    @Test(arguments: ProtectionClass.allCases)
    func crashKeepsSyncedWritesAndLeavesFilesReadable(_ protectionClass: ProtectionClass) throws {
        try withStore { fixture in
            let store = fixture.store
            let whole = patternBytes(40_000, seed: 10)
            try store.write(whole, to: "whole", protection: ProtectionChoice(protectionClass))
            let handle = try store.openFile(atPath: "f", create: true, protection: ProtectionChoice(protectionClass))
            let synced = patternBytes(33_000, seed: 11)
            try handle.write(contentsOf: synced)
            try handle.synchronize()
            let later = patternBytes(20_000, seed: 12)
            try handle.write(contentsOf: later, atOffset: 16_000)  // not synced
            var withLater = synced
            withLater.replaceSubrange(16_000..<33_000, with: later.prefix(17_000))
            withLater.append(later.dropFirst(17_000))
            try fixture.device.crash()
            expectStoreError(.handleClosed) { _ = try handle.readToEnd() }
            try handle.close()
            try fixture.unlock()
            #expect(try store.contents(atPath: "whole") == whole)
            let after = try store.contents(atPath: "f")
            #expect(after == synced || after == withLater, "after a crash: the synced state, possibly plus the unsynced write")
            // The journal left by nothing, and a new handle works.
            let reopened = try store.openFile(atPath: "f")
            try reopened.write(contentsOf: Data("ok".utf8), atOffset: 0)
            try reopened.close()
            #expect(try store.contents(atPath: "f").prefix(2) == Data("ok".utf8))
        }
    }

    @Test func eraseEmptiesTheStoreAndClosesHandles() throws {
        try withStore { fixture in
            let store = fixture.store
            var handles: [ProtectedFileHandle] = []
            for protectionClass in ProtectionClass.allCases {
                try store.write(Data("x".utf8), to: "dir/\(protectionClass.letter)", protection: ProtectionChoice(protectionClass))
                handles.append(try store.openFile(atPath: "dir/\(protectionClass.letter)"))
            }
            try store.createDirectory(atPath: "empty/dir", protection: .complete)
            try fixture.device.erase()
            #expect(try store.contentsOfDirectory(atPath: "/") == [])
            #expect(!store.fileExists(atPath: "dir/D"))
            expectStoreError(.fileNotFound) { _ = try store.contents(atPath: "dir/D") }
            for handle in handles {
                expectStoreError(.handleClosed) { _ = try handle.readToEnd() }
                expectStoreError(.handleClosed) { try handle.write(contentsOf: Data("y".utf8)) }
                try handle.close()
            }
            #expect(fixture.device.state == .booted)
            #expect(!fixture.device.hasPasscode)
            // The store works again.
            try fixture.device.unlock()
            try store.write(Data("fresh".utf8), to: "dir/new", protection: .complete)
            #expect(try store.contents(atPath: "dir/new") == Data("fresh".utf8))
            #expect(try store.contentsOfDirectory(atPath: "/") == ["dir"])
        }
    }

    // MARK: - Error precedence

    static let invalidPaths = ["", "a/../b", "..", "/..", "a/..", "./..", "a//../b", "a\u{0}b", "\u{0}"]

    @Test(arguments: invalidPaths)
    func invalidPathWinsOverEverything(_ path: String) throws {
        try withStore { fixture in
            let store = fixture.store
            try store.write(Data("x".utf8), to: "a/b", protection: .complete)
            try fixture.lock()
            let label = path.replacingOccurrences(of: "\u{0}", with: "\\0")
            expectStoreError(.invalidPath, label) { _ = try store.contents(atPath: path) }
            expectStoreError(.invalidPath, label) { _ = try store.openFile(atPath: path) }
            expectStoreError(.invalidPath, label) { _ = try store.openFile(atPath: path, create: true, protection: .complete) }
            expectStoreError(.invalidPath, label) { _ = try store.fileHandle(forReadingAtPath: path) }
            expectStoreError(.invalidPath, label) { try store.write(Data(), to: path) }
            expectStoreError(.invalidPath, label) { try store.write(Data(), to: path, options: .withoutOverwriting) }
            expectStoreError(.invalidPath, label) { _ = try store.attributesOfItem(atPath: path) }
            expectStoreError(.invalidPath, label) { _ = try store.contentsOfDirectory(atPath: path) }
            expectStoreError(.invalidPath, label) { try store.createDirectory(atPath: path) }
            expectStoreError(.invalidPath, label) { try store.removeItem(atPath: path) }
            expectStoreError(.invalidPath, label) { try store.moveItem(atPath: path, toPath: "a/b") }
            expectStoreError(.invalidPath, label) { try store.moveItem(atPath: "a/b", toPath: path) }
            expectStoreError(.invalidPath, label) { try store.moveItem(atPath: path, toPath: "missing") }
            expectStoreError(.invalidPath, label) { try store.copyItem(atPath: path, toPath: "c") }
            expectStoreError(.invalidPath, label) { try store.copyItem(atPath: "a/b", toPath: path) }
            expectStoreError(.invalidPath, label) { try store.setProtectionClass(ProtectionClass.none, ofItemAtPath: path) }
            #expect(!store.fileExists(atPath: path))
            #expect(try store.contentsOfDirectory(atPath: "/") == ["a"])
            #expect(try store.contentsOfDirectory(atPath: "a") == ["b"])
        }
    }

    @Test func existenceWinsOverProtectedDataUnavailable() throws {
        try withStore { fixture in
            let store = fixture.store
            try store.write(Data("x".utf8), to: "dir/a", protection: .complete)
            try fixture.lock()
            expectStoreError(.fileNotFound) { _ = try store.contents(atPath: "dir/missing") }
            expectStoreError(.fileNotFound) { _ = try store.openFile(atPath: "dir/missing") }
            expectStoreError(.fileNotFound) { _ = try store.contents(atPath: "nodir/a") }
            expectStoreError(.isADirectory) { _ = try store.contents(atPath: "dir") }
            expectStoreError(.isADirectory) { _ = try store.openFile(atPath: "dir") }
            expectStoreError(.isADirectory) { _ = try store.openFile(atPath: "dir", create: true, protection: .complete) }
            expectStoreError(.isADirectory) { try store.write(Data(), to: "dir", protection: .complete) }
            expectStoreError(.notADirectory) { _ = try store.contents(atPath: "dir/a/b") }
            expectStoreError(.notADirectory) { _ = try store.openFile(atPath: "dir/a/b", create: true, protection: .complete) }
            expectStoreError(.notADirectory) { try store.write(Data(), to: "dir/a/b", protection: .complete) }
            expectStoreError(.fileExists) { try store.write(Data(), to: "dir/a", protection: .complete, options: .withoutOverwriting) }
            expectStoreError(.fileExists) { try store.copyItem(atPath: "dir/a", toPath: "dir/a") }
            expectStoreError(.fileNotFound) { try store.copyItem(atPath: "dir/missing", toPath: "dir/new") }
            expectStoreError(.fileNotFound) { try store.setProtectionClass(ProtectionClass.none, ofItemAtPath: "dir/missing") }
            expectStoreError(.protectedDataUnavailable) { _ = try store.contents(atPath: "dir/a") }
            expectStoreError(.protectedDataUnavailable) { try store.setProtectionClass(ProtectionClass.none, ofItemAtPath: "dir/a") }
            expectStoreError(.protectedDataUnavailable) { try store.copyItem(atPath: "dir/a", toPath: "dir/copy") }
            #expect(try store.contentsOfDirectory(atPath: "dir") == ["a"])
        }
    }

    /// A failed create changes nothing: not even the missing parent directories it would have made.
    @Test func failedCreateChangesNothing() throws {
        try withStore { fixture in
            let store = fixture.store
            try fixture.lock()
            expectStoreError(.protectedDataUnavailable) { _ = try store.openFile(atPath: "new/dir/f", create: true, protection: .complete) }
            expectStoreError(.protectedDataUnavailable) { try store.write(Data("x".utf8), to: "other/f", protection: .complete) }
            let names = try store.contentsOfDirectory(atPath: "/")
            #expect(names == [])
        }
    }

    @Test func handleClosedThenNotPermittedThenUnavailable() throws {
        try withStore { fixture in
            let store = fixture.store
            try store.write(Data("content".utf8), to: "a", protection: .complete)
            let reader = try store.openFile(atPath: "a", mode: .read)
            let writer = try store.openFile(atPath: "a", mode: .write)
            let appender = try store.openFile(atPath: "a", mode: .append)
            let closed = try store.openFile(atPath: "a", mode: .update)
            try closed.close()
            try fixture.lock()
            // Closed beats everything.
            expectStoreError(.handleClosed) { _ = try closed.readToEnd() }
            expectStoreError(.handleClosed) { try closed.write(contentsOf: Data("x".utf8)) }
            expectStoreError(.handleClosed) { try closed.truncate(atOffset: 0) }
            expectStoreError(.handleClosed) { _ = try closed.offset() }
            // The mode beats the lock.
            expectStoreError(.notPermitted) { try reader.write(contentsOf: Data("x".utf8)) }
            expectStoreError(.notPermitted) { try reader.write(contentsOf: Data("x".utf8), atOffset: 0) }
            expectStoreError(.notPermitted) { try reader.truncate(atOffset: 0) }
            expectStoreError(.notPermitted) { _ = try writer.read(upToCount: 1) }
            expectStoreError(.notPermitted) { _ = try writer.readToEnd() }
            expectStoreError(.notPermitted) { _ = try appender.read(atOffset: 0, upToCount: 1) }
            // Then the lock.
            expectStoreError(.protectedDataUnavailable) { _ = try reader.read(upToCount: 1) }
            expectStoreError(.protectedDataUnavailable) { try writer.write(contentsOf: Data("x".utf8)) }
            expectStoreError(.protectedDataUnavailable) { try appender.write(contentsOf: Data("x".utf8)) }
            // Key-free operations.
            try reader.seek(toOffset: 3)
            #expect(try reader.offset() == 3)
            #expect(try writer.size() == 7)
            try writer.synchronize()
            for handle in [reader, writer, appender] { try handle.close() }
            for handle in [reader, writer, appender] {
                expectStoreError(.handleClosed) { _ = try handle.read(upToCount: 1) }
                expectStoreError(.handleClosed) { try handle.write(contentsOf: Data("x".utf8)) }
            }
            try fixture.unlock()
            #expect(try store.contents(atPath: "a") == Data("content".utf8), "the failed writes changed nothing")
        }
    }
}
