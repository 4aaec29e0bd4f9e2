import ArgumentParser
import DataProtection
import Foundation

/// `dpctl rm <path>`.
struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Remove a file or an empty directory (never asks for the passcode).")

    @OptionGroup var storeOptions: StoreOptions

    @Argument(help: ArgumentHelp("The item to remove.", valueName: "path"))
    var path: String

    func run() throws {
        try reporting { try Session(storeOptions).store.removeItem(atPath: path) }
    }
}
