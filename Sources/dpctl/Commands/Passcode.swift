import ArgumentParser
import DataProtection
import Foundation

/// `dpctl passcode set|change|remove`.
struct PasscodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passcode",
        abstract: "Set, change or remove the passcode (no file is re-encrypted).",
        subcommands: [Set.self, Change.self, Remove.self])

    /// Where the new passcode of `change` comes from.
    struct NewPasscodeOptions: ParsableArguments {
        @Option(name: .customLong("new-passcode-file"), help: ArgumentHelp(
            "Read the new passcode from this file. Else $DPCTL_NEW_PASSCODE, else a no-echo prompt (asked twice).",
            valueName: "file"))
        var newPasscodeFile: String?

        func read() throws(DataProtectionError) -> Passcode {
            try PasscodeInput.obtain(file: newPasscodeFile, variable: "DPCTL_NEW_PASSCODE", option: "--new-passcode-file",
                                prompt: "New passcode: ", confirm: true)
        }
    }

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a passcode on a store that has none (from --passcode-file, $DPCTL_PASSCODE or the terminal).")

        @OptionGroup var storeOptions: StoreOptions
        @OptionGroup var passcodeOptions: PasscodeOptions
        @OptionGroup var output: OutputOptions

        func run() throws {
            try reporting {
                let session = try Session(storeOptions)
                guard try !session.device.hasPasscode else {
                    throw DataProtectionError(.fileExists, "A passcode is already set.", hint: "Use `dpctl passcode change`.")
                }
                let passcode = try PasscodeInput.obtain(file: passcodeOptions.passcodeFile, prompt: "New passcode: ", confirm: true)
                try session.device.unlock(passcode: nil)
                try session.device.setPasscode(passcode)
                try CommandReport(["passcodeSet": .bool(true)]).print(json: output.json, text: "Passcode set.")
            }
        }
    }

    struct Change: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change the passcode: the current one from --passcode-file, $DPCTL_PASSCODE or the terminal; the new one from --new-passcode-file, $DPCTL_NEW_PASSCODE or the terminal.")

        @OptionGroup var storeOptions: StoreOptions
        @OptionGroup var passcodeOptions: PasscodeOptions
        @OptionGroup var output: OutputOptions
        @OptionGroup var newPasscode: NewPasscodeOptions

        func run() throws {
            try reporting {
                let session = try Session(storeOptions)
                guard try session.device.hasPasscode else {
                    throw DataProtectionError(.invalidArgument, "No passcode is set.", hint: "Use `dpctl passcode set`.")
                }
                let old = try PasscodeInput.obtain(file: passcodeOptions.passcodeFile, prompt: "Current passcode: ")
                try session.device.unlock(passcode: old)
                let new = try newPasscode.read()
                try session.device.changePasscode(from: old, to: new)
                try CommandReport(["passcodeSet": .bool(true)]).print(json: output.json, text: "Passcode changed.")
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove the passcode (the current one from --passcode-file, $DPCTL_PASSCODE or the terminal).")

        @OptionGroup var storeOptions: StoreOptions
        @OptionGroup var passcodeOptions: PasscodeOptions
        @OptionGroup var output: OutputOptions

        func run() throws {
            try reporting {
                let session = try Session(storeOptions)
                guard try session.device.hasPasscode else {
                    throw DataProtectionError(.invalidArgument, "No passcode is set.")
                }
                let old = try PasscodeInput.obtain(file: passcodeOptions.passcodeFile, prompt: "Current passcode: ")
                try session.device.unlock(passcode: old)
                try session.device.removePasscode(old)
                try CommandReport(["passcodeSet": .bool(false)]).print(json: output.json, text: "Passcode removed.")
            }
        }
    }
}
