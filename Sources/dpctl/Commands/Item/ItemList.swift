import ArgumentParser
import DataProtection
import DataProtectionSQLite
import Foundation

/// `dpctl item ls [--attr k=v …] [--json]`: items without their secrets.
struct ItemList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List items (never their secrets): all, or those with the given attributes.",
        discussion: "Items whose class is locked are not listed; their accessibilities are named on standard error (`locked` in --json).")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var selection: ItemSelectionOptions
    @OptionGroup var output: OutputOptions

    struct Report: Encodable {
        let items: [ItemJSON]
        let locked: [String]
    }

    func run() throws {
        try reporting {
            let session = try Session(storeOptions, passcode: passcodeOptions)
            let keychain = try session.keychain(unlockingFor: .complete)
            let search: ItemSearch
            if let id = selection.id {
                search = ItemSearch(items: [try keychain.item(withID: id)], lockedAccessibilities: [])
            } else {
                search = try keychain.items(matching: try selection.attributes())
            }
            let locked = search.lockedAccessibilities.map(\.rawValue).sorted()
            if output.json { return try printJSON(Report(items: search.items.map(ItemJSON.init), locked: locked)) }
            for item in search.items {
                let attributes = item.attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                print("\(item.id)  \(item.accessibility.rawValue)  \(item.label.debugDescription)  \(attributes)")
            }
            if !locked.isEmpty {
                FileHandle.standardError.write("dpctl: note: items that are \(locked.joined(separator: ", ")) are locked and not listed.\n")
            }
        }
    }
}
