import ArgumentParser
import DataProtection
import DataProtectionAgent
import Dispatch
import Foundation

/// `dpctl agent start|stop`: a long-lived owner of the store that every dpctl command
/// then talks to (unlock once, work, lock).
struct AgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run the store's agent: unlock once, then every dpctl command works through it until it locks.",
        discussion: """
            While the agent runs, dpctl commands are its clients: `unlock` sends the passcode to it, `lock` locks it, \
            `status` shows its live state and `watch` its notifications; file commands ask no passcode and fail with \
            protectedDataUnavailable (exit 10) when the agent's device lacks the class key. The agent listens on \
            $XDG_RUNTIME_DIR/dpctl/<store id>.sock (else agent.sock in the device directory), serves only its own user, \
            and cannot be read by ptrace or /proc/<pid>/mem.
            """,
        subcommands: [Start.self, Stop.self, SystemdUnits.self])

    struct Start: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start the agent (detached; prints its pid and socket once it is ready).")

        @OptionGroup var storeOptions: StoreOptions

        @Option(name: .customLong("auto-lock"), help: ArgumentHelp(
            "Lock after this long with no client request (e.g. 30s, 5m), or `never`.", valueName: "duration"))
        var autoLock = AutoLockSetting(duration: .seconds(300))

        @Option(name: .customLong("grace"), help: ArgumentHelp(
            "After a lock, class complete and completeUnlessOpen keys stay this long (iOS: 10 s).", valueName: "duration"))
        var grace = WaitDuration(duration: .seconds(10))

        @Flag(name: .customLong("foreground"), help: """
            Stay in the foreground (for systemd or a terminal); stop with SIGTERM or Ctrl-C. Serves on a listening socket \
            handed over by socket activation (LISTEN_FDS) when there is one.
            """)
        var foreground = false

        @Flag(name: .customLong("lock-with-session"), help: """
            Lock with the login session (logind's Lock and LockedHint, the screensavers' ActiveChanged; before sleep, with no \
            grace) and fail at start when neither logind nor a session bus answers. Without it the session is followed when \
            it is reachable. The session unlocking never unlocks the device.
            """)
        var lockWithSession = false

        @Flag(name: .customLong("secret-service"), help: """
            Also serve the store's keychain as the freedesktop Secret Service (org.freedesktop.secrets) on the session bus, \
            for secret-tool, libsecret and python-secretstorage. Fails when another process owns the name.
            """)
        var secretService = false

        @Flag(name: .customLong("detached-child"), help: .hidden)
        var detachedChild = false

        @OptionGroup var output: OutputOptions

        func run() throws {
            try reporting {
                let location = try Session.location(storeOptions)
                // Socket activation: the socket is ours already (asking it whether an agent
                // answers would be asking ourselves), and nothing is bound.
                let inherited = foreground ? AgentServer.inheritedListeningDescriptor() : nil
                if inherited == nil, let running = try Session.agent(location) {
                    throw DataProtectionError(.storeBusy, "An agent already serves this store (pid \(running.agentProcessIdentifier), socket \(running.socketPath)).",
                                              hint: "Stop it first: `dpctl agent stop`.")
                }
                if foreground || detachedChild {
                    try serve(location, inherited: inherited)
                } else {
                    try startDetached()
                }
            }
        }

        /// Runs the agent in this process until it is stopped, on `inherited` (a listening
        /// socket handed over by socket activation) when given, else on the store's socket.
        private func serve(_ location: StoreLocation, inherited: Int32?) throws {
            if detachedChild { _ = setsid() }
            // `main` tried already; for the agent, which holds keys for hours, it is not optional.
            try ProcessProtection.makeNonDumpable()
            // Clients' plaintext passes through the agent's ordinary buffers (frames, pieces, rows):
            // every one is wiped when freed, so none outlives its use (sanitizer builds cannot).
            try? ProcessProtection.wipeFreedMemory()
            var configuration = DeviceConfiguration()
            configuration.gracePeriod = grace.duration
            let session = try Session(owning: storeOptions, configuration: configuration)
            let serverConfiguration = AgentServer.Configuration(
                autoLock: autoLock.duration, sessionFollowing: lockWithSession ? .required : .whenAvailable,
                notifiesServiceManager: foreground, servesSecretService: secretService)
            let server = if let inherited {
                try AgentServer(store: session.local!, listeningDescriptor: inherited, configuration: serverConfiguration)
            } else {
                try AgentServer(store: session.local!, socketPath: location.agentSocket, configuration: serverConfiguration)
            }
            var sources: [any DispatchSourceSignal] = []
            for signalNumber in [SIGTERM, SIGINT, SIGHUP] {
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
                source.setEventHandler { server.stop() }
                source.resume()
                sources.append(source)
            }
            if output.json && !detachedChild {
                try printJSON(CommandReport(["agent": .agent(CommandReport.Agent(pid: getpid(), socket: server.socketPath))]))
            } else {
                FileHandle.standardOutput.write("\(Self.readyPrefix) pid \(getpid()), socket \(server.socketPath)\n")
            }
            if detachedChild {
                // The starter has its line: from now on nothing holds its pipe or a terminal.
                let null = open("/dev/null", O_RDWR)
                if null >= 0 {
                    dup2(null, STDIN_FILENO)
                    dup2(null, STDOUT_FILENO)
                    dup2(null, STDERR_FILENO)
                    if null > STDERR_FILENO { close(null) }
                }
            }
            withExtendedLifetime(sources) { server.run() }
        }

        static let readyPrefix = "dpctl agent: ready,"

        /// Starts `dpctl agent start --detached-child …` in a session of its own and returns
        /// once it is listening (or reports why it could not start).
        private func startDetached() throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            var arguments = ["agent", "start", "--detached-child", "--auto-lock", autoLock.spelling,
                             "--grace", grace.duration.scenarioSpelling, "--wait", storeOptions.wait.duration.scenarioSpelling]
            if let store = storeOptions.store { arguments += ["--store", store] }
            if let device = storeOptions.device { arguments += ["--device", device] }
            if lockWithSession { arguments.append("--lock-with-session") }
            if secretService { arguments.append("--secret-service") }
            process.arguments = arguments
            let pipe = Pipe()
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = pipe
            process.standardError = pipe
            do {
                try process.run()
            } catch {
                throw DataProtectionError(.ioFailure, "Cannot start the agent: \(error.localizedDescription).")
            }
            try? pipe.fileHandleForWriting.close()
            var received = Data()
            while let chunk = try? pipe.fileHandleForReading.read(upToCount: 4096), !chunk.isEmpty {
                received.append(chunk)
                let text = String(decoding: received, as: UTF8.self)
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(Self.readyPrefix) }) {
                    let ready = line.dropFirst(Self.readyPrefix.count).trimmingCharacters(in: .whitespaces)
                    guard output.json else { return print("Agent started: \(ready).") }
                    // `pid <n>, socket <path>`: the socket path may hold anything but a newline.
                    let fields = ready.split(separator: ",", maxSplits: 1)
                    let pid = fields.first.flatMap { Int32($0.dropFirst("pid ".count)) } ?? 0
                    let socket = fields.count == 2 ? String(fields[1].trimmingCharacters(in: .whitespaces).dropFirst("socket ".count)) : ""
                    return try printJSON(CommandReport(["agent": .agent(CommandReport.Agent(pid: pid, socket: socket))]))
                }
            }
            process.waitUntilExit()
            FileHandle.standardError.write(received)
            throw ExitCode(process.terminationStatus == 0 ? 1 : process.terminationStatus)
        }
    }

    struct Stop: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop the agent: a reboot (handles flushed and closed, keys wiped); waits until it has exited.",
            discussion: "With no agent running, there is nothing to stop: a note, exit 0 (as `systemctl stop`).")

        @OptionGroup var storeOptions: StoreOptions
        @OptionGroup var output: OutputOptions

        func run() throws {
            try reporting {
                let location = try Session.location(storeOptions)
                // Like `systemctl stop`: nothing to stop is success, with a note.
                guard let agent = try Session.agent(location) else {
                    if output.json { return try printJSON(CommandReport(["stopped": .bool(false), "agent": .null])) }
                    return print("No agent serves this store: nothing to stop.")
                }
                let pid = agent.agentProcessIdentifier
                let stopped = CommandReport.Agent(agent)
                try agent.stopAgent()
                agent.close()
                let deadline = ContinuousClock.now + .seconds(60)
                while Self.isRunning(pid) && ContinuousClock.now < deadline {
                    Thread.sleep(forTimeInterval: 0.02)
                }
                if output.json { return try printJSON(CommandReport(["stopped": .bool(true), "agent": .agent(stopped)])) }
                print("Stopped the agent (pid \(pid)): handles flushed and closed, keys wiped.")
            }
        }

        /// Whether `pid` is alive and not a zombie waiting for its parent.
        static func isRunning(_ pid: Int32) -> Bool {
            guard kill(pid, 0) == 0 else { return false }
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return true }
            return !stat[close...].hasPrefix(") Z")
        }
    }
}

/// `--auto-lock`: a duration, or `never`.
struct AutoLockSetting: ExpressibleByArgument {
    let duration: Duration?

    init(duration: Duration?) {
        self.duration = duration
    }

    init?(argument: String) {
        if argument == "never" {
            duration = nil
            return
        }
        guard let duration = Duration(scenarioSpelling: argument), duration > .zero else { return nil }
        self.duration = duration
    }

    var spelling: String { duration?.scenarioSpelling ?? "never" }
    var defaultValueDescription: String { spelling }
}
