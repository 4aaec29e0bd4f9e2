import Foundation

/// Runs the built `dpctl` binary and captures its output.
struct DPCtlRunner {
    struct Result {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    /// The `dpctl` executable beside the test bundle (same build directory).
    static var executable: URL {
        let candidates = [
            Bundle.main.bundleURL,
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
        ]
        for directory in candidates {
            for base in [directory, directory.deletingLastPathComponent()] {
                let url = base.appendingPathComponent("dpctl")
                if FileManager.default.isExecutableFile(atPath: url.path) { return url }
            }
        }
        fatalError("dpctl not found next to the test bundle (\(candidates.map(\.path)))")
    }

    /// Runs `dpctl arguments` with the test's environment plus `environment`, or exactly
    /// `fullEnvironment` when given; standard input from `input` (else /dev/null), standard
    /// output into `outputFile` when given (then `standardOutput` is empty). With `wrapper`
    /// (a program and its arguments: `setpriv …`, `prlimit …`), runs `wrapper dpctl arguments`.
    static func run(
        _ arguments: [String], environment: [String: String] = [:], fullEnvironment: [String: String]? = nil,
        input: URL? = nil, outputFile: URL? = nil, wrapper: [String] = []
    ) throws -> Result {
        let process = Process()
        if let program = wrapper.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = Array(wrapper.dropFirst()) + [executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        process.environment = fullEnvironment ?? ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe()
        let error = Pipe()
        if let outputFile {
            _ = FileManager.default.createFile(atPath: outputFile.path, contents: nil)
            process.standardOutput = try FileHandle(forWritingTo: outputFile)
            try output.fileHandleForWriting.close()
        } else {
            process.standardOutput = output
        }
        process.standardError = error
        process.standardInput = try input.map { try FileHandle(forReadingFrom: $0) } ?? FileHandle.nullDevice
        try process.run()
        // Read both pipes to the end before waiting, so a full pipe cannot block the child.
        let group = DispatchGroup()
        nonisolated(unsafe) var errorData = Data()
        group.enter()
        DispatchQueue.global().async {
            errorData = error.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            standardOutput: String(decoding: outputData, as: UTF8.self),
            standardError: String(decoding: errorData, as: UTF8.self))
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
