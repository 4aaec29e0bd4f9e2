import ArgumentParser
import DataProtection
import Foundation

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
