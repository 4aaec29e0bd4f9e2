import ArgumentParser
import DataProtection
import Foundation

/// `dpctl get <path> [-o <file>]`.
struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a stored file to standard output or to a local file.",
        discussion: """
            Streams with constant memory. Asks for the passcode only if the file's class needs a key (never for `none`). \
            With -o and --json, prints the path, the local file, the size and the class once the file is written.
            """)

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var progress: ProgressOptions
    @OptionGroup var report: OutputOptions

    @Argument(help: ArgumentHelp("The path in the store.", valueName: "path"))
    var path: String

    @Option(name: [.customShort("o"), .customLong("output")], help: ArgumentHelp("Write to this local file instead of standard output.", valueName: "file"))
    var output: String?

    func validate() throws {
        if report.json && (output == nil || output == "-") {
            throw ValidationError("--json needs -o <file>: without it, standard output holds the file's content.")
        }
    }

    func run() throws {
        try reporting {
            let session = try Session(storeOptions, passcode: passcodeOptions)
            try Transfer(session: session, path: path, quiet: progress.quiet).run(to: output)
            guard report.json, let output else { return }
            let attributes = try session.store.attributesOfItem(atPath: path)
            try printJSON(CommandReport(["path": .text(path), "output": .text(output), "size": .bytes(attributes.size),
                                         "protectionClass": .text(attributes.protectionClass?.rawValue)]))
        }
    }
}
