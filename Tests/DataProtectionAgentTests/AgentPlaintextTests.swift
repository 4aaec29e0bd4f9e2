import DataProtection
import DataProtectionAgent
import Foundation
import SystemPackage
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// No plaintext of a class outlives its key in the agent (semantics.md, "Processes and the
/// agent"): a real `dpctl agent` process, scanned from outside through `/proc/<pid>/mem`
/// after the lock (grace 0), holds no copy of a marker written and read through put, cat,
/// get -o, a handle and SQL; and a client that paused reading gets nothing more after the discard.
@Suite("Agent plaintext after the key discard", .serialized,
       .enabled(if: ProcessInfo.processInfo.environment["DP_SANITIZER"] == nil && getuid() == 0,
                "needs root to read another process's memory, and no sanitizer (its shadow memory)"))
struct AgentPlaintextTests {
    /// A store, its device under the fixture, and a real agent (`dpctl agent start`).
    final class RealAgent {
        let directory: URL
        private(set) var pid: Int32 = 0
        private(set) var socket = ""

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("dp-plaintext-\(UUID().uuidString.prefix(12))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let initialized = try run(["init"], passcode: "1234")
            try #require(initialized.status == 0, "\(initialized.error)")
            let started = try run(["agent", "start", "--auto-lock", "never", "--grace", "0s"])
            try #require(started.status == 0, "\(started.error)")
            // "Agent started: pid <pid>, socket <path>."
            let words = started.output.split(separator: " ")
            pid = Int32(words.dropFirst(3).first?.trimmingCharacters(in: .punctuationCharacters) ?? "") ?? 0
            socket = String(started.output.split(separator: "socket ").last ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            if socket.hasSuffix(".") { socket.removeLast() }
            try #require(pid > 0 && !socket.isEmpty, "\(started.output)")
            try #require(try run(["unlock"], passcode: "1234").status == 0)
        }

        deinit {
            if pid > 0, kill(pid, 0) == 0 { _ = try? run(["agent", "stop"]) }
            if pid > 0, kill(pid, 0) == 0 { kill(pid, SIGKILL) }
            try? FileManager.default.removeItem(at: directory)
        }

        static var executable: URL {
            let candidates = [Bundle.main.bundleURL, URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
            for directory in candidates {
                for base in [directory, directory.deletingLastPathComponent()] {
                    let url = base.appendingPathComponent("dpctl")
                    if FileManager.default.isExecutableFile(atPath: url.path) { return url }
                }
            }
            fatalError("dpctl not found next to the test bundle")
        }

        var environment: [String: String] {
            var environment = ProcessInfo.processInfo.environment
            environment["DPCTL_STORE"] = directory.appendingPathComponent("store").path
            environment["XDG_STATE_HOME"] = directory.appendingPathComponent("state").path
            environment["DPCTL_DEVICE"] = nil
            environment["DPCTL_PASSCODE"] = nil
            environment["DPCTL_NEW_PASSCODE"] = nil
            return environment
        }

        /// Starts `dpctl arguments` (standard output to `output`, else a pipe the caller reads).
        func launch(_ arguments: [String], passcode: String? = nil, output: Any? = nil) throws -> (Process, Pipe, Pipe) {
            let process = Process()
            process.executableURL = Self.executable
            process.arguments = arguments
            var environment = self.environment
            environment["DPCTL_PASSCODE"] = passcode
            process.environment = environment
            let out = Pipe(), err = Pipe()
            process.standardOutput = output ?? out
            process.standardError = err
            process.standardInput = FileHandle.nullDevice
            try process.run()
            return (process, out, err)
        }

        /// Runs `dpctl arguments` to its end.
        @discardableResult
        func run(_ arguments: [String], passcode: String? = nil) throws -> (status: Int32, output: String, error: String) {
            let (process, out, err) = try launch(arguments, passcode: passcode)
            nonisolated(unsafe) var errorData = Data()
            let group = DispatchGroup()
            group.enter()
            DispatchQueue.global().async {
                errorData = err.fileHandleForReading.readDataToEndOfFile()
                group.leave()
            }
            let outputData = out.fileHandleForReading.readDataToEndOfFile()
            group.wait()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: outputData, as: UTF8.self), String(decoding: errorData, as: UTF8.self))
        }
    }

    /// ~1.2 MB of lines, each beginning with `prefix`.
    static func marker(_ prefix: String, lines: Int = 16_000) -> Data {
        var text = ""
        text.reserveCapacity(lines * 80)
        for line in 0..<lines {
            text += "\(prefix)\(String(format: "%06d", line)) the quick brown fox jumps over the lazy dog\n"
        }
        return Data(text.utf8)
    }

    @Test("after lock with grace 0, the agent's memory holds no copy of a marker put, cat, got with -o, written through a handle and returned as SQL rows")
    func noMarkerAfterTheDiscard() throws {
        let agent = try RealAgent()
        let seed = String(UInt64.random(in: 1 << 60..<UInt64.max), radix: 36)
        let prefix = "PLAINTEXT-MARKER-\(seed)-"
        let source = agent.directory.appendingPathComponent("marker.txt")
        try Self.marker(prefix).write(to: source)
        defer { try? FileManager.default.removeItem(at: source) }

        #expect(try agent.run(["mkdir", "Docs", "--class", "complete"]).status == 0)
        let put = try agent.run(["put", source.path, "Docs/marker.txt", "--class", "complete"])
        #expect(put.status == 0, "\(put.error)")
        let cat = try agent.run(["cat", "Docs/marker.txt"])
        #expect(cat.status == 0 && cat.output.utf8.count == 16_000 * (prefix.utf8.count + 51), "\(cat.error)")
        let copy = agent.directory.appendingPathComponent("copy.txt")
        let get = try agent.run(["get", "Docs/marker.txt", "-o", copy.path])
        #expect(get.status == 0, "\(get.error)")
        try? FileManager.default.removeItem(at: copy)

        // A handle: written in pieces, read back, closed; and one left open over the lock.
        let client = try AgentStore(socketPath: agent.socket)
        defer { client.close() }
        let handle = try client.openFile(atPath: "Docs/handle.txt", create: true, protection: .complete)
        let lines = Self.marker(prefix, lines: 4000)
        for start in stride(from: 0, to: lines.count, by: 100_000) {
            try handle.write(contentsOf: lines[start..<min(lines.count, start + 100_000)])
        }
        try handle.seek(toOffset: 0)
        #expect(try handle.readToEnd().count == lines.count)
        try handle.close()
        let reader = try client.openFile(atPath: "Docs/marker.txt", mode: .read)
        #expect(try reader.read(upToCount: 300_000).count == 300_000)
        // Written and not synced: the agent holds it in the handle's buffers until the discard flushes it.
        let open = try client.openFile(atPath: "Docs/open.txt", create: true, protection: .complete)
        try open.write(contentsOf: Self.marker(prefix, lines: 500))

        // SQL: rows made in the database, returned through the agent.
        let sql = try agent.run(["sql", "Docs/rows.db", "--create", "--class", "complete",
            "CREATE TABLE t(x TEXT); WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5000) "
            + "INSERT INTO t SELECT '\(prefix.dropLast())' || printf('-sql-%06d', n) || ' the lazy dog' FROM c; SELECT x FROM t"])
        #expect(sql.status == 0, "\(sql.error)")
        #expect(sql.output.components(separatedBy: prefix.dropLast() + "-sql-").count - 1 == 5000)

        // In flight over the lock: a cat whose reader reads nothing, its pieces waiting in the agent.
        let (paused, pausedOutput, pausedErrors) = try agent.launch(["cat", "Docs/marker.txt"])
        Thread.sleep(forTimeInterval: 1)
        let before = try ProcessMemory.copies(of: String(prefix.dropLast()), inProcess: agent.pid)
        #expect(before.count > 0, "positive control: the paused transfer's pieces hold the marker (\(before.count) copies)")
        #expect(try agent.run(["lock"]).status == 0)
        _ = pausedOutput.fileHandleForReading.readDataToEndOfFile()
        _ = pausedErrors.fileHandleForReading.readDataToEndOfFile()
        paused.waitUntilExit()
        #expect(paused.terminationStatus == 10, "the paused cat stops at the discard")
        let after = try ProcessMemory.copies(of: String(prefix.dropLast()), inProcess: agent.pid)
        print("agent memory scan: \(before.count) copies of the marker before the lock, \(after.count) after, \(after.bytes) bytes scanned")
        #expect(after.bytes > 1 << 20)
        #expect(after.count == 0, "copies of the marker left in the agent after the discard: \(after.count)")
        #expect(throws: DataProtectionError.self) { _ = try reader.read(upToCount: 10) }
        #expect(throws: DataProtectionError.self) { try open.write(contentsOf: Data("more".utf8)) }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        try open.close()
        let flushed = try agent.run(["cat", "Docs/open.txt"])
        #expect(flushed.status == 0 && flushed.output.utf8.count == 500 * (prefix.utf8.count + 51), "the discard flushed the handle first")
    }

    @Test("a client that paused reading a complete file gets nothing more after the discard, and fails")
    func pausedReaderStopsAtTheDiscard() throws {
        let agent = try RealAgent()
        let prefix = "PAUSED-\(UUID().uuidString)-"
        let source = agent.directory.appendingPathComponent("big.txt")
        let content = Self.marker(prefix, lines: 40_000)  // about 4 MB
        try content.write(to: source)
        #expect(try agent.run(["put", source.path, "big.txt", "--class", "complete"]).status == 0)
        let (process, out, err) = try agent.launch(["cat", "big.txt"])
        // Read a little, then pause: the agent fills the pipe and waits.
        let first = try out.fileHandleForReading.read(upToCount: 100_000) ?? Data()
        #expect(!first.isEmpty)
        Thread.sleep(forTimeInterval: 1)
        #expect(try agent.run(["lock"]).status == 0)
        Thread.sleep(forTimeInterval: 0.5)
        let rest = out.fileHandleForReading.readDataToEndOfFile()
        let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        print("paused reader: \(first.count) bytes before the lock, \(rest.count) after, of \(content.count)")
        #expect(process.terminationStatus == 10, "cat after the discard: \(process.terminationStatus) \(errors)")
        #expect(first.count + rest.count < content.count / 2, "delivered after the discard: \(rest.count) bytes")
    }
}
