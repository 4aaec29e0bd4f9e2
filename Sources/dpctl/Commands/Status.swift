import ArgumentParser
import DataProtection
import Foundation

/// `dpctl status`: state, passcode, failed attempts, next allowed attempt.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the device state, whether a passcode is set, failed attempts and the next allowed attempt.",
        discussion: "Never asks for the passcode. Each dpctl command boots the device afresh, so the state is `booted`.")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var output: OutputOptions

    struct Report: Encodable {
        var store: String
        var device: String
        var state: String
        var passcodeSet: Bool
        var failedAttempts: Int
        var nextAttemptAllowed: Date?
        var availableClasses: [String]

        func encode(to encoder: any Encoder) throws {
            enum Keys: String, CodingKey { case store, device, state, passcodeSet, failedAttempts, nextAttemptAllowed, availableClasses }
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(store, forKey: .store)
            try container.encode(device, forKey: .device)
            try container.encode(state, forKey: .state)
            try container.encode(passcodeSet, forKey: .passcodeSet)
            try container.encode(failedAttempts, forKey: .failedAttempts)
            try container.encode(nextAttemptAllowed, forKey: .nextAttemptAllowed)  // null when allowed now
            try container.encode(availableClasses, forKey: .availableClasses)
        }
    }

    func run() throws {
        try reporting {
            let session = try Session(storeOptions)
            let device = session.device
            let report = Report(
                store: storeOptions.directory.path,
                device: session.location.device.path,
                state: device.state.rawValue,
                passcodeSet: device.hasPasscode,
                failedAttempts: device.failedPasscodeAttempts,
                nextAttemptAllowed: device.nextPasscodeAttemptAllowed.map { Date(timeIntervalSince1970: Double($0.nanoseconds) / 1e9) },
                availableClasses: ProtectionClass.allCases.filter { device.isAvailable($0) }.map(\.rawValue))
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
        }
    }
}
