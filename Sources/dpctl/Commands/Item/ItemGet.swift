import ArgumentParser
import DataProtection
import DataProtectionSQLite
import Foundation
import SystemPackage

/// `dpctl item get (--id ID | --attr k=v …)`: the secret to standard output.
struct ItemGet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write an item's secret to standard output, exactly (no newline added).",
        discussion: "With attributes, the oldest matching item. No match: fileNotFound (14); locked: protectedDataUnavailable (10).")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var selection: ItemSelectionOptions

    func validate() throws {
        guard !selection.isEmpty else { throw ValidationError("Say which item: --id, or --attr (or --service/--account).") }
    }

    func run() throws {
        try reporting {
            let session = try Session(storeOptions, passcode: passcodeOptions)
            let keychain = try session.keychain(unlockingFor: .complete)
            let item = try session.selectedItems(selection, in: keychain)
                .min { ($0.creationDate, $0.id) < ($1.creationDate, $1.id) }!
            let secret = try keychain.secret(ofItemWithID: item.id)
            defer { secret.wipe() }
            try secret.write(to: .standardOutput)
        }
    }
}
