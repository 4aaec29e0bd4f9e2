import Foundation

/// A program of this build (or any other) run to its end, with what it printed captured:
/// the one process runner of the test targets (dpctl's tests and the README's).
package enum ChildProcess {
    /// How a program ended and what it printed.
    package struct Result: Sendable {
        package var status: Int32
        package var standardOutput: String
        package var standardError: String

        package init(status: Int32, standardOutput: String, standardError: String) {
            self.status = status
            self.standardOutput = standardOutput
            self.standardError = standardError
        }
    }

    /// The executable `name` of this build (beside the test bundle).
    package static func executable(_ name: String) -> URL {
        let candidates = [Bundle.main.bundleURL, URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
        for directory in candidates {
            for base in [directory, directory.deletingLastPathComponent()] {
                let url = base.appendingPathComponent(name)
                if FileManager.default.isExecutableFile(atPath: url.path) { return url }
            }
        }
        fatalError("\(name) not found next to the test bundle (\(candidates.map(\.path)))")
    }

    /// Runs `program arguments` with this process's environment plus `environment`, or exactly
    /// `fullEnvironment` when given; standard input from `input` (else /dev/null), standard
    /// output into `outputFile` when given (then `standardOutput` is empty). With `wrapper`
    /// (a program and its arguments: `setpriv …`, `prlimit …`), runs `wrapper program arguments`.
    package static func run(
        _ program: URL, _ arguments: [String], environment: [String: String] = [:],
        fullEnvironment: [String: String]? = nil, input: URL? = nil, outputFile: URL? = nil, wrapper: [String] = []
    ) throws -> Result {
        let process = Process()
        if let launcher = wrapper.first {
            process.executableURL = URL(fileURLWithPath: launcher)
            process.arguments = Array(wrapper.dropFirst()) + [program.path] + arguments
        } else {
            process.executableURL = program
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
        return Result(status: process.terminationStatus, standardOutput: String(decoding: outputData, as: UTF8.self),
                      standardError: String(decoding: errorData, as: UTF8.self))
    }
}
