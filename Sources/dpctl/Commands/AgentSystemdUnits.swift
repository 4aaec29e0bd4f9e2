import ArgumentParser
import DataProtection
import Foundation

extension AgentCommand {
    /// `dpctl agent systemd-units`: a socket and a service user unit that start the agent on
    /// the first client connection (socket activation) and tell systemd when it is ready.
    struct SystemdUnits: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "systemd-units",
            abstract: "Write dpctl-agent.socket and dpctl-agent.service, systemd user units that run the agent as a service.",
            discussion: """
                The socket listens where dpctl's clients look for this store's agent; the first connection starts \
                `dpctl agent start --foreground` (Type=notify: ready once it serves). Install them with \
                `dpctl agent systemd-units --output ~/.config/systemd/user && systemctl --user daemon-reload && \
                systemctl --user enable --now dpctl-agent.socket`. Without --output they are printed.
                """)

        @OptionGroup var storeOptions: StoreOptions

        @Option(name: .customLong("output"), help: ArgumentHelp("Write the two files into this directory (made if missing).", valueName: "dir"))
        var output: String?

        @Option(name: .customLong("auto-lock"), help: ArgumentHelp(
            "The agent's auto-lock (e.g. 30s, 5m), or `never`.", valueName: "duration"))
        var autoLock = AutoLockSetting(duration: .seconds(300))

        @Flag(name: .customLong("lock-with-session"), help: "The agent fails to start unless it can follow the login session.")
        var lockWithSession = false

        func run() throws {
            try reporting {
                let location = try Session.location(storeOptions)
                let units = Self.units(executable: Self.executable, location: location, autoLock: autoLock,
                                       lockWithSession: lockWithSession)
                guard let output else {
                    for (name, text) in units { print("# \(name)\n\(text)") }
                    return
                }
                let directory = URL(fileURLWithPath: output)
                do {
                    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                    for (name, text) in units {
                        try Data(text.utf8).write(to: directory.appendingPathComponent(name), options: .atomic)
                    }
                } catch {
                    throw DataProtectionError(.ioFailure, "Cannot write the units into \(output): \(error.localizedDescription).")
                }
                print("Wrote \(units.map(\.name).joined(separator: " and ")) into \(output).")
            }
        }

        /// This dpctl's absolute path.
        static var executable: String {
            URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        }

        /// The two units, by file name.
        static func units(executable: String, location: StoreLocation, autoLock: AutoLockSetting,
                          lockWithSession: Bool) -> [(name: String, text: String)] {
            var command = [executable, "agent", "start", "--foreground", "--auto-lock", autoLock.spelling,
                           "--store", location.data.path]
            if !location.combined { command += ["--device", location.device.path] }
            if lockWithSession { command.append("--lock-with-session") }
            let socket = """
                [Unit]
                Description=DataProtection agent socket for the store \(escaped(location.data.path))
                Documentation=man:systemd.socket(5)

                [Socket]
                ListenStream=\(escaped(location.agentSocket))
                SocketMode=0600
                DirectoryMode=0700
                RemoveOnStop=yes

                [Install]
                WantedBy=sockets.target

                """
            let service = """
                [Unit]
                Description=DataProtection agent for the store \(escaped(location.data.path))
                Requires=dpctl-agent.socket
                After=dpctl-agent.socket

                [Service]
                Type=notify
                ExecStart=\(command.map(quoted).joined(separator: " "))
                Restart=on-failure
                NoNewPrivileges=yes
                PrivateTmp=yes
                ProtectSystem=full
                MemoryDenyWriteExecute=yes
                LockPersonality=yes
                RestrictRealtime=yes
                RestrictSUIDSGID=yes
                LimitCORE=0
                UMask=0077

                [Install]
                Also=dpctl-agent.socket

                """
            return [("dpctl-agent.socket", socket), ("dpctl-agent.service", service)]
        }

        /// `text` with systemd's specifiers (`%`) doubled.
        static func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "%", with: "%%")
        }

        /// An `ExecStart=` word: double-quoted, with `\`, `"` and `%` escaped.
        static func quoted(_ word: String) -> String {
            let inner = escaped(word).replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            return "\"" + inner + "\""
        }
    }
}
