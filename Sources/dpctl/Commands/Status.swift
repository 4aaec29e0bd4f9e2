import ArgumentParser
import DataProtection
import DataProtectionAgent
import Foundation

/// `dpctl status`: state, passcode, failed attempts, next allowed attempt; with an agent,
/// its live state and timers.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the device state, whether a passcode is set, failed attempts and the next allowed attempt.",
        discussion: """
            Never asks for the passcode. With an agent running (`dpctl agent start`), the live state of its device \
            (`booted`, `unlocked`, `locked`), the time left until auto-lock and until the class keys are discarded. \
            Without one, each command boots the device afresh, so the state is `booted`.
            """)

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var output: OutputOptions

    struct Report: Encodable {
        struct Agent: Encodable {
            var pid: Int32
            var socket: String
            /// The auto-lock period in seconds; `nil`: never.
            var autoLockSeconds: Double?
            /// Seconds until auto-lock (while unlocked).
            var autoLockInSeconds: Double?
            /// Seconds until the next class key is discarded (while locked, inside the grace or inactivity period).
            var keyDiscardInSeconds: Double?
            /// The lock sources of the login session followed (empty: not followed).
            var sessionFollowed: [String] = []
            /// The buses that went away (their sources no longer followed).
            var sessionBusesLost: [String] = []

            func encode(to encoder: any Encoder) throws {
                enum Keys: String, CodingKey {
                    case pid, socket, autoLockSeconds, autoLockInSeconds, keyDiscardInSeconds, sessionFollowed, sessionBusesLost
                }
                var container = encoder.container(keyedBy: Keys.self)
                try container.encode(pid, forKey: .pid)
                try container.encode(socket, forKey: .socket)
                try container.encode(autoLockSeconds, forKey: .autoLockSeconds)
                try container.encode(autoLockInSeconds, forKey: .autoLockInSeconds)
                try container.encode(keyDiscardInSeconds, forKey: .keyDiscardInSeconds)
                try container.encode(sessionFollowed, forKey: .sessionFollowed)
                try container.encode(sessionBusesLost, forKey: .sessionBusesLost)
            }
        }

        var store: String
        var device: String
        var state: String
        var passcodeSet: Bool
        var failedAttempts: Int
        var nextAttemptAllowed: Date?
        var availableClasses: [String]
        /// The agent serving the store; `nil` when none runs.
        var agent: Agent?

        func encode(to encoder: any Encoder) throws {
            enum Keys: String, CodingKey { case store, device, state, passcodeSet, failedAttempts, nextAttemptAllowed, availableClasses, agent }
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(store, forKey: .store)
            try container.encode(device, forKey: .device)
            try container.encode(state, forKey: .state)
            try container.encode(passcodeSet, forKey: .passcodeSet)
            try container.encode(failedAttempts, forKey: .failedAttempts)
            try container.encode(nextAttemptAllowed, forKey: .nextAttemptAllowed)  // null when allowed now
            try container.encode(availableClasses, forKey: .availableClasses)
            try container.encode(agent, forKey: .agent)  // null without an agent
        }
    }

    func run() throws {
        try reporting {
            let session = try Session(storeOptions)
            let report = try Self.report(session, store: storeOptions.directory.path)
            if output.json { return try printJSON(report) }
            print("store: \(report.store)")
            print("device: \(report.device)")
            print("state: \(report.state)")
            print("passcode set: \(report.passcodeSet ? "yes" : "no")")
            print("failed attempts: \(report.failedAttempts)")
            if let next = report.nextAttemptAllowed {
                let seconds = Int(next.timeIntervalSinceNow.rounded(.up))
                print("next attempt allowed: \(ISO8601DateFormatter().string(from: next)) (in \(seconds) s)")
            } else {
                print("next attempt allowed: now")
            }
            print("available classes: \(report.availableClasses.joined(separator: ", "))")
            guard let agent = report.agent else { return print("agent: none (each command boots the device afresh)") }
            print("agent: pid \(agent.pid), socket \(agent.socket)")
            print("auto-lock: \(agent.autoLockSeconds.map { "after \(Self.seconds($0)) idle" } ?? "never")"
                  + (agent.autoLockInSeconds.map { ", in \(Self.seconds($0))" } ?? ""))
            if let discard = agent.keyDiscardInSeconds { print("class keys discarded in: \(Self.seconds(discard))") }
            print("session: " + (agent.sessionFollowed.isEmpty ? "not followed" : "followed: \(agent.sessionFollowed.joined(separator: ", "))")
                  + (agent.sessionBusesLost.isEmpty ? "" : " (went away: \(agent.sessionBusesLost.joined(separator: ", ")))"))
        }
    }

    static func report(_ session: Session, store: String) throws(DataProtectionError) -> Report {
        if let agent = session.agent {
            let status = try agent.status()
            return Report(
                store: store, device: session.location.device.path, state: status.state.rawValue, passcodeSet: status.passcodeSet,
                failedAttempts: status.failedPasscodeAttempts,
                nextAttemptAllowed: status.nextAttemptAllowedIn.map { Date(timeIntervalSinceNow: $0.seconds) },
                availableClasses: status.availableClasses.map(\.rawValue),
                agent: Report.Agent(pid: status.agentProcessIdentifier, socket: agent.socketPath, autoLockSeconds: status.autoLock?.seconds,
                                    autoLockInSeconds: status.autoLockIn?.seconds, keyDiscardInSeconds: status.keyDiscardIn?.seconds,
                                    sessionFollowed: status.sessionFollowing?.sources ?? [],
                                    sessionBusesLost: status.sessionFollowing?.lostBuses ?? []))
        }
        let device = session.local!.device
        return Report(
            store: store, device: session.location.device.path, state: device.state.rawValue, passcodeSet: device.hasPasscode,
            failedAttempts: device.failedPasscodeAttempts,
            nextAttemptAllowed: device.nextPasscodeAttemptAllowed.map { Date(timeIntervalSince1970: Double($0.nanoseconds) / 1e9) },
            availableClasses: ProtectionClass.allCases.filter { device.isAvailable($0) }.map(\.rawValue),
            agent: nil)
    }

    static func seconds(_ value: Double) -> String {
        String(format: "%.1f s", value)
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
