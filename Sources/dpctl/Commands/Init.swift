import ArgumentParser
import DataProtection
import Foundation

/// `dpctl init`: creates the store and sets its passcode.
struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the store and set its passcode.",
        discussion: """
            The passcode comes from --passcode-file, $DPCTL_PASSCODE or a no-echo prompt (asked twice). An existing store is \
            `fileExists`. With --device-key tpm the device key is made inside the TPM named by $DPCTL_TPM_TCTI \
            (default device:/dev/tpmrm0) and the passcode is bound in it (Docs/TPM.md); the device directory records the \
            choice, so later commands and the agent use the TPM too.
            """)

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var output: OutputOptions

    @Flag(name: .customLong("no-passcode"), help: "Create the store without a passcode.")
    var noPasscode = false

    @Option(name: .customLong("device-key"), help: "What holds the device key: file (the default) or tpm ($DPCTL_TPM_TCTI).")
    var deviceKey: DeviceKeyKind = .file

    func run() throws {
        try reporting {
            // Read the passcode before creating anything: a missing passcode leaves no store behind.
            let passcode = noPasscode ? nil
                : try PasscodeInput.obtain(file: passcodeOptions.passcodeFile, prompt: "New passcode: ", confirm: true,
                                      alternative: "pass --no-passcode for a store without one")
            // With a passcode, the device is created with it: no passcode-free keybag is ever written.
            let session = try Session(creating: storeOptions, passcode: passcode, deviceKeyKind: deviceKey)
            try CommandReport(["store": .text(storeOptions.directory.path), "device": .text(session.location.device.path),
                               "passcodeSet": .bool(passcode != nil), "deviceKey": .text(deviceKey.rawValue)])
                .print(json: output.json, text: "Created the store at \(storeOptions.directory.path)" + (passcode == nil ? " (no passcode)." : " with a passcode."))
        }
    }
}

extension DeviceKeyKind: ExpressibleByArgument {}
