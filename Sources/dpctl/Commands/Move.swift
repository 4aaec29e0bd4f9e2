import ArgumentParser
import DataProtection
import Foundation

/// `dpctl mv <src> <dst>`.
struct Move: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mv",
        abstract: "Move or rename an item (never asks for the passcode).",
        discussion: "As with mv(1), a destination that is an existing directory, or ends in `/`, means inside it, under the same name; otherwise the destination must not exist.")

    @OptionGroup var storeOptions: StoreOptions

    @Argument(help: ArgumentHelp("The item to move.", valueName: "src"))
    var source: String

    @Argument(help: ArgumentHelp("Its new path.", valueName: "dst"))
    var destination: String

    func run() throws {
        try reporting {
            let store = try Session(storeOptions).store
            try store.moveItem(atPath: source, toPath: Self.target(of: source, movedTo: destination, in: store))
        }
    }

    /// `destination/<source's name>` when `destination` ends in `/` or is a directory; else `destination`.
    static func target(of source: String, movedTo destination: String, in store: any ProtectedFileSystem) -> String {
        let intoDirectory = destination.hasSuffix("/") || (try? store.attributesOfItem(atPath: destination))?.type == .directory
        guard intoDirectory, let name = source.split(separator: "/").last else { return destination }
        return (destination.hasSuffix("/") ? destination : destination + "/") + name
    }
}
