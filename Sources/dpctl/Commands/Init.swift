import ArgumentParser
import DataProtection
import Foundation

/// `dpctl init`: creates the store and sets its passcode.
struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the store and set its passcode.",
        discussion: "The passcode comes from --passcode-file, $DPCTL_PASSCODE or a no-echo prompt (asked twice). An existing store is `fileExists`.")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var output: OutputOptions

    @Flag(name: .customLong("no-passcode"), help: "Create the store without a passcode.")
    var noPasscode = false

    func run() throws {
        try reporting {
            // Read the passcode before creating anything: a missing passcode leaves no store behind.
            let passcode = noPasscode ? nil
                : try PasscodeInput.obtain(file: passcodeOptions.passcodeFile, prompt: "New passcode: ", confirm: true,
                                      alternative: "pass --no-passcode for a store without one")
            // With a passcode, the device is created with it: no passcode-free keybag is ever written.
            let session = try Session(creating: storeOptions, passcode: passcode)
            try CommandReport(["store": .text(storeOptions.directory.path), "device": .text(session.location.device.path),
                               "passcodeSet": .bool(passcode != nil)])
                .print(json: output.json, text: "Created the store at \(storeOptions.directory.path)" + (passcode == nil ? " (no passcode)." : " with a passcode."))
        }
    }
}
