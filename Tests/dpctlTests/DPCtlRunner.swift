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
    /// output into `outputFile` when given (then `standardOutput` is empty).
    static func run(
        _ arguments: [String], environment: [String: String] = [:], fullEnvironment: [String: String]? = nil,
        input: URL? = nil, outputFile: URL? = nil
    ) throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
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
}
