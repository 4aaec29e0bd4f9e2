import DataProtection
import Foundation
import Testing

/// One owner per store, across processes (`semantics.md`, "Processes and the
/// agent"): concurrent one-shot commands serialize instead of failing, and
/// passcode attempts from many processes are counted exactly.
@Suite("dpctl store ownership across processes")
struct OwnershipTests {
    /// A running `dpctl` whose exit can be awaited, with its output.
    final class Background {
        let process = Process()
        let output = Pipe()
        let error = Pipe()
        let input = Pipe()

        init(_ arguments: [String], environment: [String: String], keepInputOpen: Bool = false) throws {
            process.executableURL = DPCtlRunner.executable
            process.arguments = arguments
            process.environment = environment
            process.standardOutput = output
            process.standardError = error
            process.standardInput = keepInputOpen ? input : FileHandle.nullDevice
            try process.run()
        }

        /// Waits for the exit; standard output and standard error as text.
        func finish() -> DPCtlRunner.Result {
            let errorData = error.fileHandleForReading.readDataToEndOfFile()
            let outputData = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return DPCtlRunner.Result(status: process.terminationStatus,
                                      standardOutput: String(decoding: outputData, as: UTF8.self),
                                      standardError: String(decoding: errorData, as: UTF8.self))
        }
    }

    /// Runs every command line at once, each in its own process; their results in order.
    static func concurrently(_ runs: [[String]], environments: [[String: String]]) throws -> [DPCtlRunner.Result] {
        let started = try zip(runs, environments).map { try Background($0, environment: $1) }
        return started.map { $0.finish() }
    }

    /// Names under `directory` (recursively) that are debris of interrupted writes.
    static func debris(under directory: URL) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: directory.path)
        var found: [String] = []
        while let name = enumerator?.nextObject() as? String {
            if (name as NSString).lastPathComponent.hasPrefix(".tmp-") { found.append(name) }
        }
        return found
    }

    @Test("a command waits while a streaming put owns the store, then runs; --wait 0s fails at once with storeBusy (25) naming the owner")
    func commandsWaitForTheOwner() throws {
        let fixture = try StoreFixture()
        try fixture.initialize(passcode: nil)
        let put = try Background(["put", "-", "long.bin", "--class", "none"],
                                 environment: fixture.environment(passcode: nil), keepInputOpen: true)
        let first = Data(repeating: 7, count: 100_000)
        put.input.fileHandleForWriting.write(first)
        // Until the put owns the store, an impatient `ls` may still get in first.
        var busy: DPCtlRunner.Result?
        for _ in 0..<200 {
            let attempt = try fixture.run(["ls", "--wait", "0s"], passcode: nil)
            if attempt.status == 25 { busy = attempt; break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        let refused = try #require(busy, "ls never found the store owned by the put")
        #expect(refused.standardError.contains("process \(put.process.processIdentifier)"), "\(refused.standardError)")
        #expect(refused.standardError.contains("(storeBusy)"))

        let waiting = try Background(["ls", "--wait", "60s"], environment: fixture.environment(passcode: nil))
        let rest = Data(repeating: 8, count: 50_000)
        put.input.fileHandleForWriting.write(rest)
        try put.input.fileHandleForWriting.close()
        let putResult = put.finish()
        #expect(putResult.status == 0, "\(putResult.standardError)")
        let listed = waiting.finish()
        #expect(listed.status == 0, "\(listed.standardError)")
        #expect(listed.standardOutput.contains("long.bin"))
        let got = try fixture.run(["cat", "long.bin"], passcode: nil)
        #expect(got.status == 0)
        #expect(Data(got.standardOutput.utf8).count == first.count + rest.count)
    }

    @Test("24 concurrent wrong passcodes in 24 processes are counted exactly: the counter equals the incorrectPasscode verdicts")
    func concurrentAttemptsCountExactly() throws {
        let fixture = try StoreFixture()
        try fixture.initialize(passcode: "1234")
        let runs = Array(repeating: ["unlock"], count: 24)
        let environments = (0..<24).map { fixture.environment(passcode: "wrong-\($0)") }
        let results = try Self.concurrently(runs, environments: environments)
        let incorrect = results.filter { $0.status == 11 }.count
        let delayed = results.filter { $0.status == 12 }.count
        #expect(incorrect + delayed == 24, "\(results.map(\.status)): \(results.map(\.standardError))")
        // 1-4 failures: no delay; the 5th starts a minute's delay, so the other 19 are refused uncounted.
        #expect(incorrect == 5)
        let status = try fixture.run(["status", "--json"])
        #expect(status.status == 0)
        #expect(try status.json()["failedAttempts"] as? Int == incorrect)
        // Every verdict reported the count it made: 1, 2, 3, 4, 5 consecutive failures, each once.
        let counts = results.filter { $0.status == 11 }.compactMap { result in
            result.standardError.firstMatch(of: /(\d+) consecutive/).flatMap { Int($0.1) }
        }
        #expect(counts.sorted() == [1, 2, 3, 4, 5], "\(results.filter { $0.status == 11 }.map(\.standardError))")
    }

    @Test("3 processes x 20 rounds of concurrent puts, to one path and to distinct paths: all succeed, all read back, no debris")
    func concurrentPutsSerialize() throws {
        let fixture = try StoreFixture()
        try fixture.initialize(passcode: nil)
        var sources: [URL] = []
        for writer in 0..<3 {
            sources.append(try fixture.localFile("w\(writer)", Data("written by \(writer)\n".utf8)))
        }
        for round in 0..<20 {
            var runs: [[String]] = []
            for writer in 0..<3 {
                runs.append(["put", sources[writer].path, "same.txt"])
                runs.append(["put", sources[writer].path, "r\(round)-w\(writer).txt"])
            }
            let results = try Self.concurrently(runs, environments: Array(repeating: fixture.environment(passcode: nil), count: runs.count))
            for (run, result) in zip(runs, results) {
                #expect(result.status == 0, "round \(round), \(run): \(result.standardError)")
            }
            let same = try fixture.run(["cat", "same.txt"], passcode: nil)
            #expect(same.status == 0)
            #expect((0..<3).map { "written by \($0)\n" }.contains(same.standardOutput), "round \(round): \(same.standardOutput)")
        }
        for round in 0..<20 {
            for writer in 0..<3 {
                let read = try fixture.run(["cat", "r\(round)-w\(writer).txt"], passcode: nil)
                #expect(read.status == 0 && read.standardOutput == "written by \(writer)\n", "r\(round)-w\(writer)")
            }
        }
        #expect(Self.debris(under: fixture.store).isEmpty, "\(Self.debris(under: fixture.store))")
    }

    @Test("a passcode change waits for the program that owns the store: the last change wins and both processes agree")
    func passcodeChangeRace() throws {
        let fixture = try StoreFixture()
        try fixture.initialize(passcode: "1234")
        var configuration = DeviceConfiguration(passcodeCost: .minimal)
        configuration.ownershipTimeout = .zero
        var change: Background?
        let identifier = try #require(try ProtectedStore.identifier(ofDataDirectory: fixture.store))
        let device = fixture.stateHome.appendingPathComponent("dpctl/\(identifier)")
        do {
            // A program unlocks the store with 1234 and stays open...
            let store = try ProtectedStore(directory: fixture.store, deviceDirectory: device, configuration: configuration)
            try store.device.unlock(passcode: "1234")
            // ...meanwhile `dpctl passcode change` 1234 -> 5678 is started: it must wait.
            change = try Background(["passcode", "change", "--wait", "60s"],
                                    environment: fixture.environment(passcode: "1234", extra: ["DPCTL_NEW_PASSCODE": "5678"]))
            Thread.sleep(forTimeInterval: 0.5)
            #expect(change?.process.isRunning == true, "dpctl did not wait for the owner")
            // The program changes 1234 -> 1111, then exits (its store is released).
            try store.device.changePasscode(from: "1234", to: "1111")
        }
        let changed = try #require(change).finish()
        // dpctl ran after the program: 1234 is no longer the passcode, so its change is refused.
        #expect(changed.status == 11, "\(changed.standardError)")
        #expect(try fixture.run(["unlock"], passcode: "1111").status == 0)
        #expect(try fixture.run(["unlock"], passcode: "5678").status == 11)
        let reopened = try ProtectedStore(directory: fixture.store, deviceDirectory: device, configuration: configuration)
        try reopened.device.unlock(passcode: "1111")
        #expect(reopened.device.state == .unlocked)
    }
}
