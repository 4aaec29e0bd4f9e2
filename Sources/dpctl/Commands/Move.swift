import ArgumentParser
import DataProtection
import Foundation

/// `dpctl mv <src> <dst>`.
struct Move: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mv",
        abstract: "Move or rename an item; the destination must not exist (never asks for the passcode).")

    @OptionGroup var storeOptions: StoreOptions

    @Argument(help: ArgumentHelp("The item to move.", valueName: "src"))
    var source: String

    @Argument(help: ArgumentHelp("Its new path.", valueName: "dst"))
    var destination: String

    func run() throws {
        try reporting { try Session(storeOptions).store.moveItem(atPath: source, toPath: destination) }
    }
}
