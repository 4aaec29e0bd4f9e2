import ArgumentParser
import DataProtection
import DataProtectionSQLite
import Foundation

/// `dpctl item update (--id ID | --attr k=v …) [--label L] [--new-attr k=v …] [--accessibility A] [--secret-stdin | --secret-file F]`.
struct ItemUpdate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Change the label, the attributes, the secret or the accessibility of an item (by --id) or of every item with the given attributes.",
        discussion: "--new-attr replaces the whole attribute set. A new --accessibility moves the item, crash-safely, keeping its id.")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var selection: ItemSelectionOptions
    @OptionGroup var output: OutputOptions

    @Option(name: .customLong("label"), help: ArgumentHelp("The new label.", valueName: "text"))
    var label: String?

    @Option(name: .customLong("new-attr"), help: ArgumentHelp("The new attribute set, one attribute each (repeatable).", valueName: "key=value"))
    var newAttributePairs: [String] = []

    @Option(name: .customLong("accessibility"), help: ArgumentHelp(
        "The new accessibility: \(ItemAccessibility.allCases.map(\.rawValue).joined(separator: ", ")).", valueName: "name"))
    var accessibility: ItemAccessibility?

    @Flag(name: .customLong("secret-stdin"), help: "Read the new secret from standard input.")
    var secretFromStandardInput = false

    @Option(name: .customLong("secret-file"), help: ArgumentHelp("Read the new secret from this file.", valueName: "file"))
    var secretFile: String?

    func validate() throws {
        guard !selection.isEmpty else { throw ValidationError("Say which items: --id, or --attr (or --service/--account).") }
        guard !(secretFromStandardInput && secretFile != nil) else { throw ValidationError("--secret-stdin and --secret-file both given.") }
        guard label != nil || !newAttributePairs.isEmpty || secretFromStandardInput || secretFile != nil || accessibility != nil else {
            throw ValidationError("Nothing to change: give --label, --new-attr, --accessibility, --secret-stdin or --secret-file.")
        }
    }

    func run() throws {
        try reporting {
            let newAttributes = newAttributePairs.isEmpty ? nil : try ItemSelectionOptions.parse(newAttributePairs, option: "--new-attr")
            let secret = secretFromStandardInput || secretFile != nil ? try SecretInput.read(file: secretFile) : nil
            defer { secret?.wipe() }
            let session = try Session(storeOptions, passcode: passcodeOptions)
            let keychain = try session.keychain(unlockingFor: .complete)
            let updated: [KeychainItem]
            if let id = selection.id {
                guard try selection.attributes().isEmpty else { throw ValidationError("--id and attributes both given.") }
                updated = [try keychain.updateItem(withID: id, label: label, attributes: newAttributes, secret: secret, accessibility: accessibility)]
            } else if let accessibility {
                // Item by item: each change of accessibility may be a move between databases.
                let search = try keychain.items(matching: try selection.attributes())
                guard !search.items.isEmpty else {
                    throw Keychain.noMatch(search, "No item matches \(Keychain.describe(try selection.attributes())).")
                }
                updated = try search.items.map { item throws(DataProtectionError) in
                    try keychain.updateItem(withID: item.id, label: label, attributes: newAttributes, secret: secret, accessibility: accessibility)
                }
            } else {
                updated = try keychain.update(matching: try selection.attributes(), label: label, attributes: newAttributes, secret: secret)
            }
            if output.json { return try printJSON(updated.map(ItemJSON.init)) }
            for item in updated { print(item.id) }
        }
    }
}
