import ArgumentParser
import DataProtection
import Foundation

/// `dpctl lock`: locks the agent's device.
struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lock the agent's device (needs `dpctl agent start`).",
        discussion: "Files of class complete become unavailable after the grace period; completeUntilFirstUserAuthentication files stay available.")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        try reporting {
            let session = try Session(storeOptions)
            let agent = try session.requireAgent(for: "lock")
            try agent.device.lock()
            try CommandReport(["state": .text(try agent.device.state.rawValue), "agent": .agent(CommandReport.Agent(agent))])
                .print(json: output.json, text: "Locked.")
        }
    }
}
