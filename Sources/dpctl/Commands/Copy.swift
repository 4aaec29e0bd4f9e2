import ArgumentParser
import DataProtection
import Foundation

/// `dpctl cp <src> <dst>`.
struct Copy: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cp",
        abstract: "Copy a file within the store.",
        discussion: "Asks for the passcode only if the source's or the copy's class needs a key.")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions

    @Option(name: .customLong("class"), help: "The copy's class (default: the source's).")
    var protectionClass: ProtectionClass?

    @Argument(help: ArgumentHelp("The file to copy.", valueName: "src"))
    var source: String

    @Argument(help: ArgumentHelp("The copy's path.", valueName: "dst"))
    var destination: String

    func run() throws {
        try reporting {
            let session = try Session(storeOptions, passcode: passcodeOptions)
            let attributes = try session.store.attributesOfItem(atPath: source)
            guard attributes.type == .file else { throw DataProtectionError(.isADirectory, "\(source) is a directory.") }
            // Existence errors come before the passcode (semantics.md's order).
            if session.store.fileExists(atPath: destination) {
                throw DataProtectionError(.fileExists, "\(destination) already exists.")
            }
            let sourceClass = attributes.protectionClass ?? .default
            try session.unlock(for: sourceClass)
            let copyClass = protectionClass ?? sourceClass
            if copyClass != .completeUnlessOpen { try session.unlock(for: copyClass) }
            try session.store.copyItem(atPath: source, toPath: destination, protection: ProtectionChoice(protectionClass))
        }
    }
}
