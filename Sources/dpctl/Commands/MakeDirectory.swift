import ArgumentParser
import DataProtection
import Foundation

/// `dpctl mkdir <path>`.
struct MakeDirectory: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mkdir",
        abstract: "Create a directory (never asks for the passcode).")

    @OptionGroup var storeOptions: StoreOptions

    @Flag(name: [.customShort("p"), .customLong("parents")], help: "Create missing parents too.")
    var parents = false

    @Option(name: .customLong("class"), help: "The class new entries take (default: the parent's).")
    var protectionClass: ProtectionClass?

    @Argument(help: ArgumentHelp("The directory to create.", valueName: "path"))
    var path: String

    func run() throws {
        try reporting {
            try Session(storeOptions).store.createDirectory(atPath: path, withIntermediateDirectories: parents, protection: ProtectionChoice(protectionClass))
        }
    }
}
