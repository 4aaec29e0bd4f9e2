import ArgumentParser
import DataProtection
import DataProtectionAgent
import Foundation

/// `dpctl watch`: one line per notification of the agent's device, as it happens.
struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the agent's notifications as they happen, one per line, until interrupted (needs `dpctl agent start`).",
        discussion: """
            Lines are `<ISO 8601 time> <notification>`; with --json, one JSON object per line. An agent that follows the \
            login session also reports sessionLocked, sessionSleeping, sessionUnlocked (the device stays locked: a front end \
            may prompt for the passcode) and sessionBusLost, each with its source in parentheses (JSON: "source").
            """)

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var output: OutputOptions

    struct Line: Encodable {
        var date: Date
        var notification: String
        /// Where a session event came from (`nil` for the device's notifications: the key is left out).
        var source: String?
    }

    func run() throws {
        try reporting {
            let agent = try Session(storeOptions).requireAgent(for: "watch")
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var container = encoder.singleValueContainer()
                try container.encode(Self.timestamp(date))
            }
            var failure: (any Error)?
            try agent.device.watchAll(ready: {
                // Scripts wait for this line before acting (standard error, so output stays events only).
                if isatty(STDERR_FILENO) == 1 || ProcessInfo.processInfo.environment["DPCTL_WATCH_READY"] != nil {
                    FileHandle.standardError.write("dpctl: watching the agent (pid \(agent.agentProcessIdentifier))\n")
                }
            }) { event in
                let line: String
                if output.json {
                    guard let data = try? encoder.encode(Line(date: event.date, notification: event.name, source: event.source)) else { return false }
                    line = String(decoding: data, as: UTF8.self)
                } else {
                    line = "\(Self.timestamp(event.date)) \(event.name)" + (event.source.map { " (\($0))" } ?? "")
                }
                do {
                    try FileHandle.standardOutput.write(contentsOf: Data((line + "\n").utf8))
                    return true
                } catch {
                    failure = error
                    return false
                }
            }
            if failure != nil { throw OutputClosed() }
        }
    }

    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}

extension AgentWatchEvent {
    /// Where a session event came from (`nil` for a notification of the device).
    var source: String? {
        if case .session(let event) = self { event.source } else { nil }
    }
}
