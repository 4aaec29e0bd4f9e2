import ArgumentParser
import DataProtection
import Foundation

/// `dpctl unlock`: checks the passcode (an attempt, counted like any other).
struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the passcode by unlocking the device (a counted attempt).",
        discussion: """
            Every dpctl command boots the device and unlocks it only for its own operation, \
            so the unlocked state does not outlive the command (there is no `lock` to run).
            """)

    @OptionGroup var storeOptions: StoreOptions

    func run() throws {
        try reporting {
            let session = try Session(storeOptions)
            try session.unlock()
            print("Unlocked: the passcode is right.")
        }
    }
}
