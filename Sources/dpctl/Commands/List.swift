import ArgumentParser
import DataProtection
import Foundation

/// `dpctl ls [path]`.
struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List a directory of the store (never asks for the passcode).")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var output: OutputOptions

    @Flag(name: [.customShort("l"), .customLong("long")], help: "Show type, class and size.")
    var long = false

    @Argument(help: ArgumentHelp("The directory.", valueName: "path"))
    var path: String = "/"

    struct Report: Encodable {
        var path: String
        var entries: [ItemReport]
    }

    func run() throws {
        try reporting {
            let store = try Session(storeOptions).store
            let names = try store.contentsOfDirectory(atPath: path).sorted()
            let base = path.hasSuffix("/") ? path : path + "/"
            var entries: [ItemReport] = []
            for name in names {
                entries.append(ItemReport(name: name, try store.attributesOfItem(atPath: base + name)))
            }
            if output.json { return try printJSON(Report(path: path, entries: entries)) }
            for entry in entries {
                let name = entry.name! + (entry.type == "directory" ? "/" : "")
                if long {
                    let kind = entry.type == "directory" ? "d" : "-"
                    let size = String(entry.size)
                    let padded = String(repeating: " ", count: max(0, 12 - size.count)) + size
                    let protectionClass = entry.protectionClass ?? "-"
                    let classColumn = protectionClass + String(repeating: " ", count: max(0, 37 - protectionClass.count))
                    print("\(kind) \(classColumn) \(padded)  \(name)")
                } else {
                    print(name)
                }
            }
        }
    }
}
