import ArgumentParser
import DataProtection
import Foundation

/// `dpctl get <path> [-o <file>]`.
struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a stored file to standard output or to a local file.",
        discussion: "Streams with constant memory. Asks for the passcode only if the file's class needs a key (never for `none`).")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(help: ArgumentHelp("The path in the store.", valueName: "path"))
    var path: String

    @Option(name: [.customShort("o"), .customLong("output")], help: ArgumentHelp("Write to this local file instead of standard output.", valueName: "file"))
    var output: String?

    func run() throws {
        try reporting {
            try Transfer(session: try Session(storeOptions, passcode: passcodeOptions), path: path, quiet: progress.quiet).run(to: output)
        }
    }
}
