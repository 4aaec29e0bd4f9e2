import ArgumentParser
import DataProtection
import DataProtectionAgent
import DataProtectionScenarios
import Foundation
import SystemPackage

/// One command's use of the store: through the store's agent when one runs (the agent's
/// device, no passcode asked while the class is available), else by opening it for the
/// command's run (booting the device; unlocking only when needed).
struct Session {
    let options: StoreOptions
    let location: StoreLocation
    /// The store, in this process or in the agent.
    let store: any ProtectedFileSystem
    /// Its device.
    let device: any DeviceControlling
    /// The agent serving the store, if one runs.
    let agent: AgentStore?
    /// The store opened in this process, when no agent runs.
    let local: ProtectedStore?
    /// `--passcode-file`, for the commands that offer it.
    var passcodeFile: String?

    /// Whether the command in this process talks to an agent (for the hints of its errors).
    nonisolated(unsafe) static var throughAgent = false

    /// Opens the existing store (`fileNotFound` with a hint to run `dpctl init` if there is
    /// none): connects to its agent when one runs, else owns the store for the command.
    init(_ options: StoreOptions, passcode: PasscodeOptions? = nil) throws(DataProtectionError) {
        self.options = options
        passcodeFile = passcode?.passcodeFile
        let location = try Self.location(options)
        self.location = location
        if let agent = try Self.agent(location) {
            Self.throughAgent = true
            (self.agent, self.local, self.store, self.device) = (agent, nil, agent, agent.device)
        } else {
            let local = try Self.open(location, options: options)
            (self.agent, self.local, self.store, self.device) = (nil, local, local, local.device)
        }
    }

    /// Opens the store in this process with `configuration`, even when an agent would serve
    /// it (`dpctl agent start`).
    init(owning options: StoreOptions, configuration: DeviceConfiguration) throws(DataProtectionError) {
        self.options = options
        location = try Self.location(options)
        let local = try Self.open(location, options: options, configuration: configuration)
        (agent, self.local, store, device) = (nil, local, local, local.device)
    }

    /// The existing store's directories.
    static func location(_ options: StoreOptions) throws(DataProtectionError) -> StoreLocation {
        guard let location = try StoreLocation.existing(options) else {
            throw DataProtectionError(.fileNotFound, "No store at \(options.directory.path).",
                                      hint: "Run `dpctl init` to create one, or pass --store <dir> (or set DPCTL_STORE).")
        }
        return location
    }

    /// The agent of the store at `location`, if one answers at its socket. An agent that runs
    /// for the store on another socket (started with another `DPCTL_AGENT_SOCKET`) owns the
    /// store: `storeBusy` at once, naming it, rather than a wait for the store it holds.
    static func agent(_ location: StoreLocation) throws(DataProtectionError) -> AgentStore? {
        let socket = location.agentSocket
        do {
            return try AgentStore(socketPath: socket)
        } catch where error.code == .fileNotFound {
            if let running = AgentSocketRecord.running(in: location.device), running.socketPath != socket {
                throw DataProtectionError(
                    .storeBusy,
                    "The store is served by its agent (pid \(running.processIdentifier)) at \(running.socketPath), not at \(socket).",
                    hint: "Set DPCTL_AGENT_SOCKET=\(running.socketPath) (or unset it, if the agent was started without it), so that dpctl goes through that agent.")
            }
            return nil
        }
    }

    /// The agent, or a failure saying that the command needs one.
    func requireAgent(for command: String) throws(DataProtectionError) -> AgentStore {
        guard let agent else {
            throw DataProtectionError(.invalidArgument, "`dpctl \(command)` needs the store's agent, and none runs.",
                                      hint: "Start it: `dpctl agent start` (then `dpctl unlock`).")
        }
        return agent
    }

    /// Creates a new store (`fileExists` if one is there), its device directory apart from
    /// the data, with `passcode` from the start.
    init(creating options: StoreOptions, passcode: Passcode?, deviceKeyKind: DeviceKeyKind = .file) throws(DataProtectionError) {
        self.options = options
        let directory = options.directory
        if (try? StoreLocation.existing(options)) != nil || (try? ProtectedStore.identifier(ofDataDirectory: directory)) != nil {
            throw DataProtectionError(.fileExists, "A store already exists at \(directory.path).",
                                      hint: "Use `dpctl erase --yes` to start afresh, or choose another --store.")
        }
        let explicit = StoreLocation.explicitDevice(options)
        // Only the parents here: the directories themselves are made by the library. All 0700 whatever the umask.
        try ParentDirectories.create(above: FilePath(directory.path))
        let identifier = try ProtectedStore.createDataDirectory(at: directory)
        let device = explicit ?? StoreLocation.defaultDevice(identifier: identifier)
        let location = StoreLocation(data: directory, device: device, combined: false)
        do throws(DataProtectionError) {
            try ParentDirectories.create(above: FilePath(device.path))
            var configuration = DeviceConfiguration()
            configuration.deviceKeyKind = deviceKeyKind
            let local = if let passcode {
                try ProtectedStore(creatingAt: directory, deviceDirectory: device, passcode: passcode,
                                   configuration: Self.withTPM(configuration))
            } else {
                try Self.open(location, options: options, configuration: configuration)
            }
            (self.agent, self.local, self.store, self.device) = (nil, local, local, local.device)
        } catch {
            // Nothing half made stays behind: the data directory holds only its identity yet.
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        self.location = location
    }

    /// Opens the store, owning it for the command's run; while another process owns
    /// it, waits up to `--wait` (saying so on standard error when that is a terminal).
    private static func open(
        _ location: StoreLocation, options: StoreOptions, configuration: DeviceConfiguration = DeviceConfiguration()
    ) throws(DataProtectionError) -> ProtectedStore {
        var configuration = withTPM(configuration)
        func attempt() throws(DataProtectionError) -> ProtectedStore {
            location.combined
                ? try ProtectedStore(directory: location.data.deletingLastPathComponent(), clock: SystemClock.shared, configuration: configuration)
                : try ProtectedStore(directory: location.data, deviceDirectory: location.device, clock: SystemClock.shared,
                                     configuration: configuration)
        }
        configuration.ownershipTimeout = .zero
        do {
            return try attempt()
        } catch where error.code == .storeBusy && options.wait.duration > .zero {
            if isatty(STDERR_FILENO) == 1 {
                FileHandle.standardError.write(
                    "dpctl: \(error.message.replacingOccurrences(of: " (waited 0 s for it)", with: "")); waiting up to \(options.wait.duration.scenarioSpelling)…\n")
            }
        }
        configuration.ownershipTimeout = options.wait.duration
        return try attempt()
    }

    /// `configuration` reaching the TPM named by `DPCTL_TPM_TCTI` (default `device:/dev/tpmrm0`),
    /// for a device whose key is in a TPM.
    static func withTPM(_ configuration: DeviceConfiguration) -> DeviceConfiguration {
        var configuration = configuration
        if let tcti = ProcessInfo.processInfo.environment["DPCTL_TPM_TCTI"], !tcti.isEmpty {
            configuration.tpmTCTI = tcti
        }
        return configuration
    }

    /// Unlocks the device: a bare unlock without a passcode, else with the passcode
    /// from `--passcode-file`, `DPCTL_PASSCODE` or the terminal (counted like any attempt).
    func unlock() throws(DataProtectionError) {
        if try !device.hasPasscode {
            try device.unlock(passcode: nil)
            return
        }
        try device.unlock(passcode: try PasscodeInput.obtain(file: passcodeFile, prompt: "Passcode: "))
    }

    /// Unlocks first when `protectionClass` needs a class key that is not in memory. Never
    /// through an agent: its device stays as it is (`dpctl unlock` unlocks it); an operation
    /// on a class it lacks fails with protectedDataUnavailable.
    func unlock(for protectionClass: ProtectionClass) throws(DataProtectionError) {
        guard agent == nil, protectionClass.requiresPasscodeKey else { return }
        if try !device.isAvailable(protectionClass) { try unlock() }
    }

    /// The class a new file at `path` would take: the replaced file's, else the
    /// nearest directory's, else the default.
    func effectiveClass(forNewFileAt path: String, given: ProtectionClass?) -> ProtectionClass {
        if let given { return given }
        var components = path.split(separator: "/").map(String.init)
        while !components.isEmpty {
            if let attributes = try? store.attributesOfItem(atPath: components.joined(separator: "/")),
               let protectionClass = attributes.protectionClass {
                return protectionClass
            }
            components.removeLast()
        }
        if let root = try? store.attributesOfItem(atPath: "/"), let protectionClass = root.protectionClass { return protectionClass }
        return .default
    }
}

/// Runs a command body, turning errors into `dpctl: error: … (code)` and the exit status table.
func reporting(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as DataProtectionError {
        throw error.reportAndExit()
    } catch is OutputClosed {
        throw ExitCode.success
    }
}

/// Where passcodes come from: a file, the environment, or a no-echo prompt on a terminal. Never an
/// argument. Every source is read straight into secure memory (``Passcode``): a passcode is never
/// a `String` in `dpctl`, and it is its bytes, whatever they are (never decoded).
enum PasscodeInput {
    /// The most a passcode file (or a typed line) may hold.
    static let fileLimit = 4096

    /// The environment variables that may hold a passcode.
    static let variables = ["DPCTL_PASSCODE", "DPCTL_NEW_PASSCODE", "DPCTL_BACKUP_PASSPHRASE"]

    /// The passcode variables, moved into secure memory and out of the environment by
    /// ``captureEnvironment()`` at the start of `main`.
    static let captured: [String: Passcode] = {
        var passcodes: [String: Passcode] = [:]
        for name in variables { passcodes[name] = Passcode.takingEnvironmentVariable(name) }
        return passcodes
    }()

    /// Moves the passcode variables into secure memory and out of the environment, before
    /// anything reads it (`ProcessInfo.environment` copies every variable into `String`s) and
    /// before any child process inherits it.
    static func captureEnvironment() {
        _ = captured
    }

    /// The passcode from `file`, else env `variable` (an empty value counts as not given), else
    /// the terminal when standard input is one; the hint names `option` (and `alternative`).
    static func obtain(
        file: String?, variable: String = "DPCTL_PASSCODE", option: String = "--passcode-file", prompt: String, confirm: Bool = false,
        alternative: String? = nil
    ) throws(DataProtectionError) -> Passcode {
        if let file { return try contents(ofFile: file) }
        if let value = captured[variable], value.byteCount > 0 { return value }
        guard isatty(STDIN_FILENO) == 1 else {
            throw DataProtectionError(.protectedDataUnavailable, "A passcode is needed, and standard input is not a terminal to ask for it.",
                                      hint: "Set \(variable) or pass \(option) <file>" + (alternative.map { ", or \($0)." } ?? "."))
        }
        let first = try promptNoEcho(prompt)
        if confirm {
            guard try promptNoEcho("Again: ").matches(first) else {
                throw .init(.invalidArgument, "The two passcodes differ.")
            }
        }
        return first
    }

    /// A passcode file's bytes, less one trailing newline (`\n` or `\r\n`), read into secure
    /// memory: refused unless it is a regular file (links followed) that neither group nor
    /// others can read, of at most ``fileLimit`` bytes. Any bytes are a passcode (never decoded:
    /// two different files never give the same passcode).
    static func contents(ofFile file: String) throws(DataProtectionError) -> Passcode {
        var status = stat()
        guard stat(file, &status) == 0 else {
            throw DataProtectionError(errno == ENOENT ? .fileNotFound : .ioFailure,
                                      "Cannot read the passcode file \(file): \(String(cString: strerror(errno))).")
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw DataProtectionError(.invalidArgument, "The passcode file \(file) is not a regular file.",
                                      hint: "Keep the passcode in a file of its own, readable only by you.")
        }
        guard status.st_mode & 0o044 == 0 else {
            throw DataProtectionError(.invalidArgument, "The passcode file \(file) can be read by others (mode \(String(status.st_mode & 0o777, radix: 8))).",
                                      hint: "chmod 600 \(file)")
        }
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(FilePath(file), .readOnly, options: [.closeOnExec])
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot open the passcode file \(file): \(error).")
        }
        defer { try? descriptor.close() }
        do throws(DataProtectionError) {
            return try Passcode(reading: descriptor, limit: fileLimit)
        } catch {
            guard error.code == .invalidArgument else {
                throw DataProtectionError(.ioFailure, "Cannot read the passcode file \(file): \(error.message)")
            }
            throw DataProtectionError(.invalidArgument, "The passcode file \(file) is longer than \(fileLimit) bytes.")
        }
    }

    /// Reads a line from /dev/tty with echo off (getpass-style) into secure memory, restoring the
    /// terminal afterwards.
    static func promptNoEcho(_ prompt: String) throws(DataProtectionError) -> Passcode {
        let tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else { throw DataProtectionError(.ioFailure, "Cannot open /dev/tty to ask for the passcode.") }
        defer { close(tty) }
        var saved = termios()
        let haveTermios = tcgetattr(tty, &saved) == 0
        if haveTermios {
            var silent = saved
            silent.c_lflag &= ~tcflag_t(ECHO)
            silent.c_lflag |= tcflag_t(ICANON)
            _ = tcsetattr(tty, TCSANOW, &silent)
        }
        defer {
            if haveTermios { _ = tcsetattr(tty, TCSANOW, &saved) }
            _ = "\n".utf8CString.withUnsafeBufferPointer { write(tty, $0.baseAddress, 1) }
        }
        _ = prompt.utf8CString.withUnsafeBufferPointer { write(tty, $0.baseAddress, $0.count - 1) }
        return try Passcode(reading: FileDescriptor(rawValue: tty), limit: fileLimit, stoppingAtNewline: true)
    }
}

/// A progress bar on standard error, only when it is a terminal and not `--quiet`.
final class ProgressBar {
    let total: UInt64?
    let enabled: Bool
    private var done: UInt64 = 0
    private var drawn = false
    private var lastDraw = ContinuousClock.now
    private let clock = ContinuousClock()

    init(total: UInt64?, quiet: Bool) {
        self.total = total
        self.enabled = !quiet && isatty(STDERR_FILENO) == 1
    }

    /// Moves the bar to `count` bytes done.
    func set(_ count: UInt64) {
        advance(by: Int(clamping: count > done ? count - done : 0))
    }

    func advance(by count: Int) {
        done += UInt64(count)
        guard enabled, clock.now - lastDraw > .milliseconds(100) else { return }
        lastDraw = clock.now
        drawn = true
        draw()
    }

    /// Completes the bar (nothing for a transfer too short to have shown one).
    func finish() {
        guard enabled, drawn else { return }
        drawn = false
        draw()
        FileHandle.standardError.write("\n")
    }

    private func draw() {
        let mebibytes = String(format: "%.1f MiB", Double(done) / 1_048_576)
        var line = "\r"
        if let total, total > 0 {
            let fraction = min(1, Double(done) / Double(total))
            let width = 30
            let filled = Int(fraction * Double(width))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "] "
            line += String(format: "%3d%% ", Int(fraction * 100)) + mebibytes
            line += String(format: " / %.1f MiB", Double(total) / 1_048_576)
        } else {
            line += mebibytes
        }
        FileHandle.standardError.write(line)
    }
}

/// Prints `value` as JSON with sorted keys on standard output.
func printJSON<T: Encodable>(_ value: T) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    let data = try encoder.encode(value)
    FileHandle.standardOutput.write(data)
    FileHandle.standardOutput.write("\n")
}

/// The piece size of streamed transfers.
let transferPieceSize = 1 << 20
