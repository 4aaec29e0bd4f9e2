import Foundation
import SodiumBridge
import Testing
@testable import DataProtection
import DataProtectionScenarios
#if canImport(Glibc)
import Glibc
#endif

/// Crash consistency: the `CrashWorker` executable does random work on a store
/// and is killed with SIGKILL at a random instant, again and again on the same
/// store; after each kill this process boots the device and checks the store.
///
/// SIGKILL models a process crash: the kernel's page cache survives, so what the
/// worker had written (even without `fsync`) is on disk. Power loss, where the
/// unsynced part is lost too, is modelled separately by ``CrashingFileSystem``.
///
/// The worker also locks the device with a handle open (the lock's flush), reboots it and
/// erases it: a lock commits a class A handle's writes; a reboot commits and closes the
/// handle; an erase cut short leaves the old store, or an empty one with no passcode or
/// with the new one.
///
/// After each kill: the device boots and unlocks with the last acknowledged passcode
/// or the one being set; every file lists, opens and reads without error; the
/// whole store (every file's content and class, the passcode) equals one of the
/// states the worker could have reached since its last committed acknowledgement:
/// for atomic operations the old or the new state, for a handle at least everything
/// up to its last completed `synchronize()` (and a prefix of the writes and
/// truncations since, the last of them possibly cut at a chunk boundary if it is
/// a write of many chunks: see ``partialWrites(of:on:path:)``);
/// the listings show nothing else (no temporary file), and no debris stays on disk.
///
/// `DP_CRASH_KILLS` (default 100) sets the number of kills; `DP_CRASH_SEED` the seed
/// (printed, so that a failure is reproduced by `DP_CRASH_SEED=… swift test --filter CrashHarness`).
/// The instant of each kill is random; the worker's operations follow from the seed.
@Suite("Crash consistency (SIGKILL harness)")
struct CrashHarnessTests {
    /// What the whole store holds, as far as a user can see.
    struct State: Equatable, CustomStringConvertible {
        struct File: Equatable {
            var content: Data
            var letter: String
        }
        var files: [String: File] = [:]
        var passcode: String

        var description: String {
            let names = files.keys.sorted().map { "\($0)=\(files[$0]!.letter)/\($0.isEmpty ? 0 : files[$0]!.content.count)" }
            return "[\(names.joined(separator: " ")) passcode \(passcode)]"
        }
    }

    static let letters: [String: ProtectionClass] = [
        "A": .complete, "B": .completeUnlessOpen, "C": .completeUntilFirstUserAuthentication,
        "CX": .completeWhenUserInactive, "D": ProtectionClass.none,
    ]

    /// The worker's pattern bytes (`Tests/CrashWorker` writes the same `SplitMix64` bytes).
    static func pattern(_ count: Int, seed: UInt64) -> Data {
        Data(SplitMix64.bytes(count: count, seed: seed))
    }

    /// Replays the worker's transcript from `start`: the states the store may be in after the kill.
    /// A write of many whole chunks is sealed and committed a cache's worth at a time: until the
    /// handle's next `synchronize()`, a crash may keep it cut at a chunk boundary (with the writes
    /// before it whole, none after it). The states `state` would take with such a prefix of `op`.
    static func partialWrites(of op: String, on state: State, path: String?) throws -> [State] {
        let words = op.split(separator: " ").map(String.init)
        guard words[0] == "write", let path else { return [] }
        let offset = Int(words[1])!, length = Int(words[3])!
        let chunk = 1 << Int(ProtectedStore.defaultChunkShift)
        let firstWhole = (offset + chunk - 1) / chunk, endWhole = (offset + length) / chunk
        guard endWhole - firstWhole >= OpenFile.directChunks else { return [] }  // cached whole, never cut
        let data = pattern(length, seed: UInt64(words[2])!)
        return (firstWhole + 1...endWhole).map { boundaryChunk in
            let boundary = boundaryChunk * chunk
            var partial = state
            var content = partial.files[path]!.content
            if content.count < boundary { content.append(Data(count: boundary - content.count)) }
            content.replaceSubrange(offset..<boundary, with: data.prefix(boundary - offset))
            partial.files[path]!.content = content
            return partial
        }
    }

    static func candidates(from start: State, transcript: [String]) throws -> [State] {
        var state = start
        var allowed = [start]
        var handlePath: String?
        var pending: String?
        var lockCommits = false
        func apply(_ line: String) throws {
            let words = line.split(separator: " ").map(String.init)
            switch words[0] {
            case "put":
                state.files[words[1]] = State.File(content: pattern(Int(words[4])!, seed: UInt64(words[3])!), letter: words[2])
            case "open":
                handlePath = words[1]
            case "write":
                let path = try #require(handlePath)
                let offset = Int(words[1])!, length = Int(words[3])!
                var content = state.files[path]!.content
                if content.count < offset + length { content.append(Data(count: offset + length - content.count)) }
                content.replaceSubrange(offset..<offset + length, with: pattern(length, seed: UInt64(words[2])!))
                state.files[path]!.content = content
            case "truncate":
                let path = try #require(handlePath)
                let size = Int(words[1])!
                var content = state.files[path]!.content
                if content.count > size { content.removeSubrange(size...) } else { content.append(Data(count: size - content.count)) }
                state.files[path]!.content = content
            case "sync":
                break
            case "close":
                handlePath = nil
            case "class":
                state.files[words[1]]!.letter = words[2]
            case "move":
                state.files[words[2]] = state.files.removeValue(forKey: words[1])
            case "remove":
                state.files.removeValue(forKey: words[1])
            case "passcode":
                state.passcode = words[1]
            case "lock":
                break  // the handle's writes: durable now if its file is class A (see below), else as they were
            case "reboot":
                handlePath = nil
            case "erase":
                state.files = [:]
                state.passcode = words[1]
            default:
                Issue.record("unknown operation \(line)")
            }
        }
        for line in transcript {
            if line == "READY" { continue }
            if line.hasPrefix("B ") {
                pending = String(line.dropFirst(2))
                allowed += try Self.partialWrites(of: pending!, on: state, path: handlePath)
                if pending!.hasPrefix("erase ") {
                    // Cut after the device was made fresh and before its new passcode: empty, no passcode.
                    allowed.append(State(passcode: ""))
                }
                // A lock commits a handle's writes only if its class key goes (class A): the others keep theirs.
                lockCommits = pending == "lock" && handlePath.flatMap { state.files[$0]?.letter } == "A"
                try apply(pending!)
                allowed.append(state)
            } else if line == "A", let op = pending {
                pending = nil
                // Everything but a handle's write or truncation is committed when acknowledged: older
                // states are gone. (A handle's changes are durable at `synchronize()`, close, reboot or the
                // lock's flush; before that the store may commit them with the ones before, never apart.)
                if !["write ", "truncate ", "open "].contains(where: op.hasPrefix) && (op != "lock" || lockCommits) {
                    allowed = [state]
                }
            }
        }
        return allowed
    }

    /// What the store holds now, read through the public API (every file opened and read).
    static func observe(_ store: ProtectedStore, passcode: String) throws -> State {
        var state = State(passcode: passcode)
        var directories = ["/"]
        while let directory = directories.popLast() {
            for name in try store.contentsOfDirectory(atPath: directory) {
                let path = directory == "/" ? "/" + name : directory + "/" + name
                let attributes = try store.attributesOfItem(atPath: path)
                if attributes.type == .directory {
                    directories.append(path)
                    continue
                }
                let letter = attributes.protectionClass?.letter ?? "?"
                state.files[path] = State.File(content: try store.contents(atPath: path), letter: letter)
            }
        }
        return state
    }

    /// The built `CrashWorker` beside the test bundle (as `dpctlTests` finds `dpctl`).
    static var worker: URL? {
        let candidates = [Bundle.main.bundleURL, URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
        for directory in candidates {
            for base in [directory, directory.deletingLastPathComponent()] {
                let url = base.appendingPathComponent("CrashWorker")
                if FileManager.default.isExecutableFile(atPath: url.path) { return url }
            }
        }
        return nil
    }

    /// Runs the worker until a SIGKILL after `delay` milliseconds (counted from its READY
    /// line, or from the start when `beforeReady`); returns its transcript and how it ended.
    static func runAndKill(_ worker: URL, directory: URL, seed: UInt64, passcode: String,
                           delay: Int, beforeReady: Bool) throws -> (lines: [String], killed: Bool, stderr: String) {
        let process = Process()
        process.executableURL = worker
        process.arguments = [directory.path, String(seed), passcode]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        let received = Locked(Data())
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var errorData = Data()
        try process.run()
        DispatchQueue.global().async {
            while true {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                received.withLock { $0.append(chunk) }
            }
            errorData = errors.fileHandleForReading.readDataToEndOfFile()
            done.signal()
        }
        if !beforeReady {
            // Until READY (or the worker dies), at most 30 s.
            let ready = Data("READY\n".utf8)
            for _ in 0..<30_000 {
                if received.withLock({ $0.starts(with: ready) }) || !process.isRunning { break }
                usleep(1_000)
            }
        }
        usleep(useconds_t(delay * 1_000))
        let killed = process.isRunning
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        done.wait()
        let text = String(decoding: received.withLock { $0 }, as: UTF8.self)
        // A line cut by the kill (no newline yet) was not acknowledged: only complete lines count.
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.removeLast()
        return (lines, killed && process.terminationReason == .uncaughtSignal, String(decoding: errorData, as: UTF8.self))
    }

    /// Keeps a failing store (and the worker's transcript) for inspection; returns where.
    static func keep(_ root: URL, _ context: String, _ lines: [String]) -> String {
        let kept = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dp-crash-failure-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.copyItem(at: root, to: kept)
        try? (context + "\n" + lines.joined(separator: "\n") + "\n").write(to: kept.appendingPathComponent("transcript.txt"), atomically: true, encoding: .utf8)
        return "store and transcript kept in \(kept.path); transcript \(lines)"
    }

    @Test("SIGKILL at random instants: every file reads as an acknowledged state, the passcode works, nothing half-visible")
    func killsAtRandomInstants() throws {
        guard let worker = Self.worker else {
            Issue.record("CrashWorker is not built next to the tests")
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let kills = environment["DP_CRASH_KILLS"].flatMap(Int.init) ?? 100
        let seed = environment["DP_CRASH_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...999_999)
        print("CRASH-HARNESS seed \(seed), \(kills) kills (reproduce: DP_CRASH_SEED=\(seed) DP_CRASH_KILLS=\(kills))")
        var random = SeededGenerator(seed: seed)
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dpk-\(seed)-\(UUID().uuidString.prefix(6))")
        defer { try? FileManager.default.removeItem(at: root) }
        var state = State(passcode: "p-start")
        do {
            // The device and its passcode exist before the first worker starts.
            let store = try ProtectedStore(directory: root, configuration: DeviceConfiguration(passcodeCost: .minimal))
            try store.device.unlock()
            try store.device.setPasscode(state.passcode)
        }
        var totals = (killed: 0, operations: 0, inFlight: 0, beforeReady: 0)
        var lifecycle: [String: (done: Int, killedInside: Int)] = [:]
        for round in 0..<kills {
            let beforeReady = Int.random(in: 0..<10, using: &random) == 0
            let delay = beforeReady ? Int.random(in: 0...60, using: &random) : Int.random(in: 0...120, using: &random)
            let roundSeed = seed &* 1_000_003 &+ UInt64(round)
            let run = try Self.runAndKill(worker, directory: root, seed: roundSeed, passcode: state.passcode,
                                          delay: delay, beforeReady: beforeReady)
            let context = "seed \(seed) round \(round) (worker seed \(roundSeed), killed \(delay) ms after "
                + "\(beforeReady ? "its start" : "READY"), \(run.lines.count) lines; reproduce: DP_CRASH_SEED=\(seed) "
                + "DP_CRASH_KILLS=\(round + 1) swift test --filter CrashHarness)"
            guard run.killed else {
                Issue.record("\(context): the worker ended by itself: \(run.stderr)")
                return
            }
            totals.killed += 1
            if !run.lines.contains("READY") { totals.beforeReady += 1 }
            totals.operations += run.lines.filter { $0 == "A" }.count
            if run.lines.last?.hasPrefix("B ") == true { totals.inFlight += 1 }
            for kind in ["lock", "reboot", "erase"] {
                lifecycle[kind, default: (0, 0)].done += run.lines.filter { $0 == "B \(kind)" || $0.hasPrefix("B \(kind) ") }.count
                if let last = run.lines.last, last == "B \(kind)" || last.hasPrefix("B \(kind) ") { lifecycle[kind]!.killedInside += 1 }
            }
            let allowed = try Self.candidates(from: state, transcript: run.lines)

            // Boot in this process, on the real file system, and look.
            let device = try Device(directory: root.appendingPathComponent("device"),
                                    configuration: DeviceConfiguration(passcodeCost: .minimal))
            let store = try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
            let passcodes = Array(Set(allowed.map(\.passcode))).sorted()
            guard let passcode = passcodes.first(where: { (try? device.unlock(passcode: $0)) != nil }) else {
                Issue.record("\(context): no acknowledged passcode unlocks (\(passcodes))")
                return
            }
            let observed: State
            do {
                observed = try Self.observe(store, passcode: passcode)
            } catch {
                Issue.record("\(context): reading the store failed: \(error); \(Self.keep(root, context, run.lines))")
                return
            }
            guard allowed.contains(observed) else {
                Issue.record("\(context): the store holds \(observed), not one of the \(allowed.count) acknowledged states \(allowed); \(Self.keep(root, context, run.lines))")
                return
            }
            let leftovers = debris(under: root)
            #expect(leftovers.isEmpty, "\(context): debris after the store opened: \(leftovers)")
            state = observed
            if (round + 1) % 1_000 == 0 {
                print("CRASH-HARNESS seed \(seed): \(round + 1) kills survived so far, \(totals.operations) acknowledged operations")
            }
        }
        print("CRASH-HARNESS seed \(seed): \(totals.killed) kills survived, \(totals.operations) acknowledged operations, \(totals.inFlight) kills inside an operation, \(totals.beforeReady) before the worker was ready; every state verified: 0 data lost, 0 forged reads; device operations "
              + lifecycle.keys.sorted().map { "\($0) \(lifecycle[$0]!.done) (\(lifecycle[$0]!.killedInside) killed inside)" }.joined(separator: ", "))
        #expect(totals.killed == kills)
    }
}
