import Foundation

/// A software TPM (`swtpm socket --tpm2`) on free local ports with a temporary state
/// directory: the TPM of the tests and of `dpctl bench`. Stopped (and its state removed)
/// by ``stop()`` or when released.
package final class SoftwareTPM: @unchecked Sendable {
    /// Whether `swtpm` is installed (Debian: swtpm, swtpm-tools).
    package static var isInstalled: Bool { executable("swtpm") != nil }

    /// The TCTI that reaches it (`swtpm:host=127.0.0.1,port=P`).
    package var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }
    /// The TPM's state directory (its NV storage and seeds).
    package let stateDirectory: URL
    private(set) var port = 0
    private var process: Process?
    private let ownsState: Bool

    /// Starts a fresh TPM (new seeds, empty NV), or one over `state` (the TPM restarted: NV kept).
    package init(state: URL? = nil) throws {
        if let state {
            stateDirectory = state
            ownsState = false
        } else {
            stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("swtpm-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: stateDirectory, withIntermediateDirectories: true)
            ownsState = true
        }
        try start()
        if ownsState {
            // swtpm's own defaults (3 failures, 1000 s) are stricter than any firmware's; each restart
            // without TPM2_Shutdown counts as a failure too. Tests that need lockout set their own.
            let set = try runTool("tpm2_dictionarylockout", ["--setup-parameters", "--max-tries=32", "--recovery-time=10",
                                                             "--lockout-recovery-time=10"])
            guard set.status == 0 else { throw SoftwareTPMError("tpm2_dictionarylockout failed: \(set.output)") }
        }
    }

    deinit { stop() }

    /// Starts swtpm on two free ports, retrying a few other ports if they were taken.
    private func start() throws {
        guard let swtpm = Self.executable("swtpm") else { throw SoftwareTPMError("swtpm is not installed (Debian: swtpm swtpm-tools)") }
        for _ in 0..<20 {
            let port = Int.random(in: 20_000..<60_000) & ~1
            let process = Process()
            process.executableURL = swtpm
            process.arguments = ["socket", "--tpm2", "--flags", "not-need-init,startup-clear",
                                 "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                                 "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
                                 "--tpmstate", "dir=\(stateDirectory.path)"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            self.port = port
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline, process.isRunning {
                if let context = try? TPMContext(tcti: tcti) {
                    context.close()
                    self.process = process
                    return
                }
                usleep(20_000)
            }
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        throw SoftwareTPMError("swtpm did not start on any of 20 ports")
    }

    /// Stops the TPM and removes its state (unless it was given one).
    package func stop() {
        halt()
        if ownsState { try? FileManager.default.removeItem(at: stateDirectory) }
    }

    /// Stops the TPM and starts it again over the same state: a reboot (NV storage kept, transient objects gone).
    package func restart() throws {
        halt()
        try start()
    }

    /// Ends the swtpm process: SIGTERM, then SIGKILL after a second (swtpm does not end on
    /// SIGTERM while a client is connected). Its NV state is on disk after every command.
    private func halt() {
        guard let process else { return }
        self.process = nil
        guard process.isRunning else { return }
        process.terminate()
        let deadline = Date().addingTimeInterval(1)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// Runs a tpm2-tools command (`tpm2_dictionarylockout -s -n 5 -t 2`, say) against this TPM;
    /// returns its exit status and output.
    @discardableResult
    package func runTool(_ name: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        guard let tool = Self.executable(name) else { throw SoftwareTPMError("\(name) is not installed (Debian: tpm2-tools)") }
        let process = Process()
        process.executableURL = tool
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["TPM2TOOLS_TCTI"] = tcti
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    private static func executable(_ name: String) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/sbin"] {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }
}

/// Why a software TPM could not be started or driven.
package struct SoftwareTPMError: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}
