import ArgumentParser
import DataProtection
import DataProtectionSQLite
import Foundation

/// `dpctl item rm (--id ID | --attr k=v …)`.
struct ItemRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Delete an item by --id, or every readable item with the given attributes.",
        discussion: "No match: fileNotFound (14); only locked items could match: protectedDataUnavailable (10).")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var selection: ItemSelectionOptions
    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard !selection.isEmpty else { throw ValidationError("Say which items: --id, or --attr (or --service/--account).") }
    }

    func run() throws {
        try reporting {
            let session = try Session(storeOptions, passcode: passcodeOptions)
            let keychain = try session.keychain(unlockingFor: .complete)
            let count: Int
            if let id = selection.id {
                guard try selection.attributes().isEmpty else { throw ValidationError("--id and attributes both given.") }
                try keychain.deleteItem(withID: id)
                count = 1
            } else {
                count = try keychain.delete(matching: try selection.attributes())
            }
            if output.json { try printJSON(CommandReport(["deleted": .integer(Int64(count))])) }
        }
    }
}
