import Foundation
import TestSupport

/// Runs the built `dpctl` binary and captures its output.
struct DPCtlRunner {
    typealias Result = ChildProcess.Result

    /// The `dpctl` executable beside the test bundle (same build directory).
    static var executable: URL { ChildProcess.executable("dpctl") }

    /// Runs `dpctl arguments` with the test's environment plus `environment`, or exactly
    /// `fullEnvironment` when given; standard input from `input` (else /dev/null), standard
    /// output into `outputFile` when given (then `standardOutput` is empty). With `wrapper`
    /// (a program and its arguments: `setpriv …`, `prlimit …`), runs `wrapper dpctl arguments`.
    static func run(
        _ arguments: [String], environment: [String: String] = [:], fullEnvironment: [String: String]? = nil,
        input: URL? = nil, outputFile: URL? = nil, wrapper: [String] = []
    ) throws -> Result {
        try ChildProcess.run(executable, arguments, environment: environment, fullEnvironment: fullEnvironment,
                             input: input, outputFile: outputFile, wrapper: wrapper)
    }

    /// Runs `dpctl arguments`, reads `count` bytes of its standard output, then closes the
    /// pipe (as `| head -c <count>` does) and waits: the bytes read, the exit status, and
    /// what it printed on standard error.
    static func readingThenClosing(_ count: Int, _ arguments: [String], environment: [String: String])
        throws -> (read: Int, status: Int32, standardError: String) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let read = try output.fileHandleForReading.read(upToCount: count)?.count ?? 0
        try output.fileHandleForReading.close()
        let errorData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (read, process.terminationReason == .exit ? process.terminationStatus : -1, String(decoding: errorData, as: UTF8.self))
    }
}
