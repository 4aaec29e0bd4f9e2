import ArgumentParser
import DataProtection
import DataProtectionSQLite
import Foundation

/// `dpctl item add --attr k=v … [--label L] [--accessibility A] [--secret-file F] [--replace]`.
struct ItemAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add an item; its secret from standard input or --secret-file (every byte, a trailing newline included).",
        discussion: "The attribute set is the item's identity: adding an existing set fails (fileExists, 15) unless --replace.")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var selection: ItemSelectionOptions
    @OptionGroup var output: OutputOptions

    @Option(name: .customLong("label"), help: ArgumentHelp("A name for people (default: the service, else the attributes).", valueName: "text"))
    var label: String?

    @Option(name: .customLong("accessibility"), help: ArgumentHelp(
        "When the secret can be read: \(ItemAccessibility.allCases.map(\.rawValue).joined(separator: ", ")).", valueName: "name"))
    var accessibility: ItemAccessibility = .whenUnlocked

    @Option(name: .customLong("secret-file"), help: ArgumentHelp("Read the secret from this file (`-`: standard input, the default).", valueName: "file"))
    var secretFile: String?

    @Flag(name: .customLong("replace"), help: "Replace the item with the same attributes (its identifier is kept).")
    var replace = false

    func validate() throws {
        guard selection.id == nil else { throw ValidationError("An item's identifier is chosen when it is added; --id is not for add.") }
        guard try !selection.attributes().isEmpty else { throw ValidationError("Give the item at least one --attr (or --service/--account).") }
    }

    func run() throws {
        try reporting {
            let attributes = try selection.attributes()
            let secret = try SecretInput.read(file: secretFile)
            defer { secret.wipe() }
            let session = try Session(storeOptions, passcode: passcodeOptions)
            let keychain = try session.keychain(unlockingFor: accessibility.protectionClass)
            let item = try keychain.add(secret, label: label ?? selection.service ?? Keychain.describe(attributes), attributes: attributes,
                                        accessibility: accessibility, replacing: replace)
            if output.json { return try printJSON(ItemJSON(item)) }
            print(item.id)
        }
    }
}
