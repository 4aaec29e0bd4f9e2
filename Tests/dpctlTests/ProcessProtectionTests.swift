import Foundation
import Testing

/// `dpctl` keeps plaintext out of core dumps and away from its user's other processes
/// (`ProcessProtection.makeNonDumpable()`, first thing in `main`).
@Suite("dpctl process protection")
struct ProcessProtectionTests {
    static let setpriv = "/usr/bin/setpriv"
    /// Root without capabilities: a process of one user like any other (root's
    /// CAP_SYS_PTRACE would read any process).
    static let capless = ["--inh-caps=-all", "--bounding-set=-all", "--"]

    /// Starts `arguments` as a capability-less process (standard output to `output`, else nowhere).
    static func capless(_ arguments: [String], environment: [String: String]? = nil, input: Pipe? = nil, output: Pipe? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: setpriv)
        process.arguments = capless + arguments
        if let environment { process.environment = environment }
        process.standardInput = input ?? FileHandle.nullDevice
        process.standardOutput = output ?? FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Whether a capability-less process of the same user can open `/proc/<pid>/mem`.
    static func memoryOpens(_ pid: Int32) throws -> Bool {
        let reader = try capless(["/bin/dd", "if=/proc/\(pid)/mem", "of=/dev/null", "bs=1", "count=0"])
        reader.waitUntilExit()
        return reader.terminationStatus == 0
    }

    /// Whether the core file limit of `pid` is zero.
    static func coreLimitIsZero(_ pid: Int32) throws -> Bool {
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        return limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }?.contains(" 0 ") == true
    }

    @Test("a one-shot command holding the device unlocked cannot be read or dumped; a dumpable process can",
          .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: setpriv)))
    func oneShotCommand() throws {
        let control = try Self.capless(["/bin/sleep", "30"])
        defer { control.terminate() }
        let fixture = try StoreFixture()
        try fixture.initialize()
        // `put -` opens and unlocks the store, then waits on standard input.
        let input = Pipe()
        let put = try Self.capless([DPCtlRunner.executable.path, "put", "-", "secret", "--class", "complete"],
                                   environment: fixture.environment(passcode: "1234"), input: input)
        Thread.sleep(forTimeInterval: 0.5)
        #expect(try Self.memoryOpens(control.processIdentifier), "the control must be readable for the test to mean anything")
        #expect(try !Self.memoryOpens(put.processIdentifier), "a same-user process opened dpctl's memory")
        #expect(try Self.coreLimitIsZero(put.processIdentifier))
        try input.fileHandleForWriting.write(contentsOf: Data("payload".utf8))
        try input.fileHandleForWriting.close()
        put.waitUntilExit()
        #expect(put.terminationStatus == 0)
        #expect(try fixture.run(["cat", "secret"]).standardOutput == "payload")
    }
}
