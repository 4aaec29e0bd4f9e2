import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// I/O faults, SQLite style: every store and device operation is run once to
/// count its system calls, then again with each call failing in turn (EIO for
/// every kind; also ENOSPC with a short write for `write`, EACCES for `open`).
///
/// After each fault: the caller got a clear error (`ioFailure`, naming the call)
/// or, where the failed call was only cleanup, success; what the store shows is
/// the state before the operation or after it, never a mixture and never a
/// temporary file; once the fault clears the same store works (a new file is
/// written and read back; a handle's `synchronize()` succeeds and shows the new
/// state); and after a crash and a restart on the real file system, the state
/// is still the old or the new one, with no debris left on disk.
@Suite("I/O faults at every call site")
struct IOFaultTests {
    static let passcode = "1234"
    static let newPasscode = "5678"

    /// One operation under test. `handle` is a handle on `/a.txt`, opened for
    /// updating before the fault is armed.
    struct Operation: Sendable, CustomTestStringConvertible {
        let name: String
        let run: @Sendable (ProtectedStore, ProtectedFileHandle) throws -> Void
        /// After the fault clears, what finishes the operation (for a handle: the same
        /// write again, then `synchronize()`); then the store must show the new state exactly.
        var complete: (@Sendable (ProtectedFileHandle) throws -> Void)?
        /// States between the old and the new one that a multi-step operation may
        /// stop at, as items added to the old state (`mkdir -p` makes one directory at a time).
        var intermediate: [String: String] = [:]
        /// For an operation of several calls, the states after each call that may have
        /// succeeded before the failing one, as items added to the old state (a handle's
        /// earlier writes stay, acknowledged; the failing write itself changes nothing).
        var acknowledged: [[String: String]] = []
        /// False for a passcode change: the files stay, which passcode works is checked apart.
        var changesFiles = true
        var testDescription: String { name }
    }

    static let operations: [Operation] = [
        Operation(name: "put a new file") { store, _ in
            try store.write(patternBytes(20_000, seed: 2), to: "/dir/new.bin")
        },
        Operation(name: "replace a file") { store, _ in
            try store.write(patternBytes(33_000, seed: 3), to: "/dir/b.txt")
        },
        // One write that overwrites part of chunk 0, all of chunk 1, and appends (journal and growth).
        Operation(name: "handle: overwrite and append, synchronize", run: { _, handle in
            try handle.write(contentsOf: patternBytes(60_000, seed: 4), atOffset: 10_000)
            try handle.synchronize()
        }, complete: { handle in
            try handle.write(contentsOf: patternBytes(60_000, seed: 4), atOffset: 10_000)
            try handle.synchronize()
        }),
        // Two overwriting commits through one handle: the second's journal is written over the
        // first's, kept open between them, and is shorter (the journal file is cut).
        Operation(name: "handle: two overwrites, the second journal over the first", run: { _, handle in
            try twoOverwrites(handle)
        }, complete: { handle in
            try twoOverwrites(handle)
        }, intermediate: twoOverwritesFirst(), acknowledged: [twoOverwritesFirst()]),
        // Appends past a full cache (70 chunks after the 3 committed): a deferred append (records
        // in place, the old last partial chunk kept cached, no commit), then the commit at synchronize.
        Operation(name: "handle: long append, synchronize", run: { _, handle in
            try longAppend(handle)
        }, complete: { handle in
            try longAppend(handle)
        }, acknowledged: longAppendAcknowledged()),
        Operation(name: "handle: truncate, synchronize", run: { _, handle in
            try handle.truncate(atOffset: 20_001)
            try handle.synchronize()
        }, complete: { handle in
            try handle.truncate(atOffset: 20_001)
            try handle.synchronize()
        }),
        Operation(name: "handle: create a file", run: { store, _ in
            let created = try store.openFile(atPath: "/dir/created", create: true)
            try created.write(contentsOf: patternBytes(100, seed: 6))
            try created.close()
        }, intermediate: ["/dir/created": "file C 0 \(StoreSnapshot.digest(Data()))"]),
        Operation(name: "change a file's class") { store, _ in
            try store.setProtectionClass(.complete, ofItemAtPath: "/a.txt")
        },
        Operation(name: "change a class none file's class (re-encrypted under a new key)") { store, _ in
            try store.setProtectionClass(.complete, ofItemAtPath: "/dir/plain.txt")
        },
        Operation(name: "move the open file (rebound)") { store, _ in
            try store.moveItem(atPath: "/a.txt", toPath: "/dir/a.txt")
        },
        Operation(name: "change a directory's class") { store, _ in
            try store.setProtectionClass(.completeUnlessOpen, ofItemAtPath: "/dir")
        },
        Operation(name: "move a file") { store, _ in
            try store.moveItem(atPath: "/dir/b.txt", toPath: "/moved.txt")
        },
        Operation(name: "move a directory") { store, _ in
            try store.moveItem(atPath: "/dir", toPath: "/dir2")
        },
        Operation(name: "remove a file") { store, _ in
            try store.removeItem(atPath: "/dir/b.txt")
        },
        Operation(name: "remove a directory") { store, _ in
            try store.removeItem(atPath: "/dir/empty")
        },
        Operation(name: "create directories", run: { store, _ in
            try store.createDirectory(atPath: "/x/y")
        }, intermediate: ["/x": "dir C"]),
        Operation(name: "copy a file") { store, _ in
            try store.copyItem(atPath: "/dir/b.txt", toPath: "/copy.txt")
        },
        Operation(name: "change the passcode", run: { store, _ in
            try store.device.changePasscode(from: passcode, to: newPasscode)
        }, changesFiles: false),
    ]

    /// Overwrites all of `/a.txt` (three chunks), synchronizes, then 1,000 bytes inside its
    /// chunk 1, synchronizes.
    static func twoOverwrites(_ handle: ProtectedFileHandle) throws {
        try handle.write(contentsOf: patternBytes(aText.count, seed: 20), atOffset: 0)
        try handle.synchronize()
        try handle.write(contentsOf: patternBytes(1_000, seed: 21), atOffset: 20_000)
        try handle.synchronize()
    }

    /// `/a.txt` after the first commit of ``twoOverwrites(_:)`` (as a snapshot item).
    static func twoOverwritesFirst() -> [String: String] {
        let content = patternBytes(aText.count, seed: 20)
        return ["/a.txt": "file C \(content.count) \(StoreSnapshot.digest(content))"]
    }

    static let longAppendPieces = 57

    /// ``longAppendPieces`` writes of 20,000 bytes from the end of `/a.txt` (40,000 bytes), then `synchronize()`.
    static func longAppend(_ handle: ProtectedFileHandle) throws {
        for piece in 0..<longAppendPieces {
            try handle.write(contentsOf: longAppendPiece(piece), atOffset: UInt64(aText.count + piece * 20_000))
        }
        try handle.synchronize()
    }

    static func longAppendPiece(_ piece: Int) -> Data { patternBytes(20_000, seed: UInt64(10 + piece)) }

    /// `/a.txt` after each of the first writes of ``longAppend(_:)`` but the last (as snapshot items).
    static func longAppendAcknowledged() -> [[String: String]] {
        var content = aText
        return (0..<longAppendPieces - 1).map { piece in
            content.append(longAppendPiece(piece))
            return ["/a.txt": "file C \(content.count) \(StoreSnapshot.digest(content))"]
        }
    }

    /// The content `prepare(_:_:)` gives `/a.txt`.
    static let aText = patternBytes(40_000, seed: 1)

    /// The store every case starts from, on `fileSystem`: unlocked, passcode set,
    /// `/a.txt` (3 chunks), `/dir/b.txt`, `/dir/plain.txt` (class none), `/dir/empty/`; and a handle on `/a.txt`.
    static func prepare(_ root: URL, _ fileSystem: any FileSystem) throws -> (ProtectedStore, ProtectedFileHandle) {
        let store = try ScratchStore.unlocked(at: root, on: fileSystem, passcode: passcode)
        try store.write(aText, to: "/a.txt")
        try store.write(patternBytes(100, seed: 7), to: "/dir/b.txt", protection: .complete)
        try store.write(patternBytes(30_000, seed: 8), to: "/dir/plain.txt", protection: .none)
        try store.createDirectory(atPath: "/dir/empty")
        let handle = try store.openFile(atPath: "/a.txt")
        return (store, handle)
    }

    static func scratch() -> URL {
        URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dpf-\(UUID().uuidString.prefix(12))", isDirectory: true)
    }

    /// The faults for one call site: EIO always, plus the errno typical of the call.
    static func errnos(for call: FaultInjectingFileSystem.Call) -> [Errno] {
        switch call {
        case .write: [.ioError, .noSpace]
        case .open: [.ioError, .permissionDenied]
        default: [.ioError]
        }
    }

    /// Totals over every operation, printed at the end of each test for the README's figures.
    struct Tally {
        var injected: [FaultInjectingFileSystem.Call: Int] = [:]
        var failedWithError = 0
        var succeededAnyway = 0
    }

    @Test("every call site of every operation, failed in turn", arguments: operations)
    func faultAtEveryCall(_ operation: Operation) throws {
        // The old and new states, and how many calls of each kind the operation makes.
        let counter = FaultInjectingFileSystem()
        let root = Self.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let (store, handle) = try Self.prepare(root, counter)
        let old = try StoreSnapshot.take(store)
        counter.resetCounts()
        try operation.run(store, handle)
        let counts = counter.counts
        let new = try StoreSnapshot.take(store)
        try? handle.close()
        #expect((old != new) == operation.changesFiles, "the operation changes something")

        var tally = Tally()
        for call in FaultInjectingFileSystem.Call.allCases {
            for occurrence in stride(from: 1, through: counts[call] ?? 0, by: 1) {
                for errno in Self.errnos(for: call) {
                    let fault = FaultInjectingFileSystem.Fault(call: call, occurrence: occurrence, errno: errno)
                    try check(operation, fault, old: old, new: new, tally: &tally)
                }
            }
        }
        let total = tally.injected.values.reduce(0, +)
        print("IO-FAULTS \(operation.name): \(total) faults injected (\(tally.injected.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))); \(tally.failedWithError) reported, \(tally.succeededAnyway) absorbed")
        #expect(total >= counts.values.reduce(0, +), "every call failed at least once")
    }

    func check(_ operation: Operation, _ fault: FaultInjectingFileSystem.Fault, old: StoreSnapshot, new: StoreSnapshot, tally: inout Tally) throws {
        let fileSystem = FaultInjectingFileSystem()
        let root = Self.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let (store, handle) = try Self.prepare(root, fileSystem)
        fileSystem.arm(fault)
        let result = outcome { try operation.run(store, handle) }
        fileSystem.disarm()
        guard fileSystem.injected == 1 else {
            Issue.record("\(operation.name), \(fault): the fault was not reached (\(fileSystem.injected) injected)")
            return
        }
        tally.injected[fault.call, default: 0] += 1
        switch result {
        case .success:
            tally.succeededAnyway += 1
        case .failure(let error):
            tally.failedWithError += 1
            #expect(error.code == .ioFailure && error.message.contains("injected"),
                    "\(operation.name), \(fault): a clear I/O error, got \(error)")
        }

        // In this process, fault cleared: old or new, and the store works.
        let passcodes = [Self.passcode, Self.newPasscode]
        var halfway = old
        halfway.items.merge(operation.intermediate) { $1 }
        var allowed: [Result<StoreSnapshot, DataProtectionError>] = [.success(old), .success(new), .success(halfway)]
        for items in operation.acknowledged {
            var state = old
            state.items.merge(items) { $1 }
            allowed.append(.success(state))
        }
        let seen = outcome { try StoreSnapshot.take(store) }
        #expect(allowed.contains(seen), "\(operation.name), \(fault): after the fault the store shows \(seen)")
        #expect(fileSystem.doubleCloses.isEmpty, "\(operation.name), \(fault): descriptors closed twice: \(fileSystem.doubleCloses)")
        if let complete = operation.complete {
            let finished = outcome { try complete(handle) }
            #expect(finished.isSuccess, "\(operation.name), \(fault): finishing after the fault: \(finished)")
            #expect((try? StoreSnapshot.take(store)) == new, "\(operation.name), \(fault): finished, the new state")
        }
        let probe = Data("probe".utf8)
        let probed = outcome { () throws -> Data in
            try store.write(probe, to: "/probe")
            return try store.contents(atPath: "/probe")
        }
        #expect(probed == .success(probe), "\(operation.name), \(fault): the store is usable after the fault: \(probed)")

        // A crash now, then a restart on the real file system.
        try store.device.crash()
        let restarted = try ScratchStore.restarted(at: root, replacing: store)
        let device = restarted.device
        let unlocked = passcodes.contains { (try? device.unlock(passcode: $0)) != nil }
        #expect(unlocked, "\(operation.name), \(fault): the device unlocks with the old or the new passcode")
        let after = outcome { try StoreSnapshot.take(restarted, excluding: ["/probe"]) }
        #expect(allowed.contains(after), "\(operation.name), \(fault): after a restart the store shows \(after)")
        #expect((try? restarted.contents(atPath: "/probe")) == probe, "\(operation.name), \(fault): the probe survived")
        #expect(debris(under: root).isEmpty, "\(operation.name), \(fault): debris left after restart: \(debris(under: root))")
    }
}

extension IOFaultTests {
    /// A passcode attempt that fails at any call: an answer (`incorrectPasscode`) is only
    /// ever given once the failure is counted on disk; the count never goes back.
    @Test("passcode attempts: every call failed in turn; never an uncounted wrong answer", arguments: [false, true])
    func attemptFaults(_ right: Bool) throws {
        let counter = FaultInjectingFileSystem()
        let root = Self.scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let (store, _) = try Self.prepare(root, counter)
        try store.device.lock()
        counter.resetCounts()
        _ = outcome { try store.device.unlock(passcode: right ? Self.passcode : "wrong") }
        let counts = counter.counts
        var injected = 0
        for call in FaultInjectingFileSystem.Call.allCases {
            for occurrence in stride(from: 1, through: counts[call] ?? 0, by: 1) {
                for errno in Self.errnos(for: call) {
                    let fault = FaultInjectingFileSystem.Fault(call: call, occurrence: occurrence, errno: errno)
                    let fileSystem = FaultInjectingFileSystem()
                    let root = Self.scratch()
                    defer { try? FileManager.default.removeItem(at: root) }
                    let (store, handle) = try Self.prepare(root, fileSystem)
                    try handle.close()
                    try store.device.lock()
                    fileSystem.arm(fault)
                    let result = outcome { try store.device.unlock(passcode: right ? Self.passcode : "wrong") }
                    fileSystem.disarm()
                    injected += fileSystem.injected
                    #expect(fileSystem.injected == 1, "\(fault) reached")
                    try store.device.crash()
                    store.device.relinquishOwnership()
                    let device = try Device(directory: root.appendingPathComponent("device"), clock: VirtualClock(), configuration: .testing())
                    let failures = device.failedPasscodeAttempts
                    switch result {
                    case .failure(let error) where error.code == .incorrectPasscode:
                        #expect(!right && failures == 1, "\(fault): a wrong answer was given, and \(failures) failures are on disk")
                    case .failure(let error):
                        #expect(error.code == .ioFailure, "\(fault): \(error)")
                        #expect(failures <= 1, "\(fault)")
                    case .success:
                        #expect(right, "\(fault): a wrong passcode unlocked")
                        #expect(failures <= 1, "\(fault)")
                    }
                    // The device still works with the right passcode.
                    #expect(outcome { try device.unlock(passcode: Self.passcode) }.isSuccess, "\(fault): unlock after the fault")
                }
            }
        }
        print("IO-FAULTS passcode attempt (\(right ? "right" : "wrong")): \(injected) faults injected")
        #expect(injected >= counts.values.reduce(0, +))
    }
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { true } else { false }
    }
}
