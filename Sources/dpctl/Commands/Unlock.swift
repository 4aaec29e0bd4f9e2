import ArgumentParser
import DataProtection
import Foundation

/// `dpctl unlock`: checks the passcode (an attempt, counted like any other).
struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unlock the agent's device, or check the passcode when no agent runs (a counted attempt).",
        discussion: """
            With an agent (`dpctl agent start`), the passcode is read here and sent to the agent, whose device \
            stays unlocked until `dpctl lock` or auto-lock. Without one, every dpctl command boots the device and \
            unlocks it only for its own operation, so this only checks the passcode.
            """)

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        try reporting {
            let session = try Session(storeOptions, passcode: passcodeOptions)
            try session.unlock()
            // `state`: the agent's device's, else this command's own (which ends with it).
            try CommandReport(["state": .text(try session.device.state.rawValue), "agent": .agent(session.agent.map(CommandReport.Agent.init))])
                .print(json: output.json, text: session.agent == nil
                    ? "Unlocked: the passcode is right." : "Unlocked: the agent's device stays unlocked until `dpctl lock` or auto-lock.")
        }
    }
}
