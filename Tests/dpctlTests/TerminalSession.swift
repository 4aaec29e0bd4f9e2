import Foundation

/// `dpctl` at a pseudo-terminal: util-linux's script(1) runs it, what is typed goes to its
/// input, and what the terminal was sent is gathered as it comes.
final class TerminalSession {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let shown = Gathered()

    /// Starts `dpctl arguments` (each quoted for the shell script(1) runs) with `environment`.
    init(_ arguments: [String], environment: [String: String]) throws {
        let command = ([DPCtlRunner.executable.path] + arguments).map { "'\($0)'" }.joined(separator: " ")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qec", command, "/dev/null"]
        process.environment = environment
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        let shown = shown
        output.fileHandleForReading.readabilityHandler = { handle in shown.append(handle.availableData) }
        try process.run()
    }

    /// What the terminal was sent so far.
    var screen: String { shown.text }

    /// Types `text`.
    func type(_ text: String) { input.fileHandleForWriting.write(Data(text.utf8)) }

    /// Types `bytes` (control keys).
    func type(_ bytes: [UInt8]) { input.fileHandleForWriting.write(Data(bytes)) }

    /// Whether the screen shows `expected` within `seconds`.
    func waitFor(_ expected: String, seconds: Double = 20) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if screen.contains(expected) { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return false
    }

    /// Whether the program ended within `seconds`.
    func exited(within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        return !process.isRunning
    }

    /// Ends the input (then, past 5 s, the program) unless it has ended; its exit status.
    func finish() -> Int32 {
        if process.isRunning {
            try? input.fileHandleForWriting.close()
            if !exited(within: 5) { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        output.fileHandleForReading.readabilityHandler = nil
        return process.terminationStatus
    }
}

/// Bytes gathered from a reading handler's thread.
final class Gathered: @unchecked Sendable {
    private let lock = NSLock()
    private var bytes = Data()

    func append(_ data: Data) { lock.withLock { bytes.append(data) } }

    var text: String { lock.withLock { String(decoding: bytes, as: UTF8.self) } }
}
