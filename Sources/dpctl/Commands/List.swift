import ArgumentParser
import DataProtection
import Foundation

/// One item as `ls --json` and `stat --json` print it.
struct ItemReport: Encodable {
    var name: String?
    var path: String?
    var type: String
    var size: UInt64
    var protectionClass: String?
    var creationDate: Date?
    var modificationDate: Date?

    init(name: String? = nil, path: String? = nil, _ attributes: ProtectedItemAttributes) {
        self.name = name
        self.path = path
        type = attributes.type.rawValue
        size = attributes.size
        protectionClass = attributes.protectionClass?.rawValue
        creationDate = attributes.creationDate
        modificationDate = attributes.modificationDate
    }
}

/// `dpctl ls [path]`.
struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List a directory of the store (never asks for the passcode).")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var output: OutputOptions

    @Flag(name: [.customShort("l"), .customLong("long")], help: "Show type, class and size.")
    var long = false

    @Argument(help: ArgumentHelp("The directory (default: the store root).", valueName: "path"))
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

/// `dpctl stat <path>`.
struct Stat: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show an item's type, size, class and dates (never asks for the passcode).")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: ArgumentHelp("The path in the store.", valueName: "path"))
    var path: String

    func run() throws {
        try reporting {
            let attributes = try Session(storeOptions).store.attributesOfItem(atPath: path)
            let report = ItemReport(path: path, attributes)
            if output.json { return try printJSON(report) }
            let dates = ISO8601DateFormatter()
            print("path: \(path)")
            print("type: \(report.type)")
            print("size: \(report.size)")
            print("class: \(report.protectionClass ?? "-")")
            if let date = report.creationDate { print("created: \(dates.string(from: date))") }
            if let date = report.modificationDate { print("modified: \(dates.string(from: date))") }
        }
    }
}
