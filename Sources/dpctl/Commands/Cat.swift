import ArgumentParser
import DataProtection
import Foundation

/// `dpctl cat <path>`: `get` to standard output.
struct Cat: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Write a stored file to standard output (`get` without -o).")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(help: ArgumentHelp("The path in the store.", valueName: "path"))
    var path: String

    func run() throws {
        try reporting {
            try Transfer(session: try Session(storeOptions, passcode: passcodeOptions), path: path, quiet: progress.quiet).run(to: nil)
        }
    }
}
