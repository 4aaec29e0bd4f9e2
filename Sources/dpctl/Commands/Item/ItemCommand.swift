import ArgumentParser
import DataProtection
import DataProtectionSQLite
import Foundation
import SystemPackage

/// `dpctl item add|get|ls|rm|update`: keychain items (`Docs/Items.md`).
struct ItemCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "item",
        abstract: "Keychain items: small secrets with a label, attributes and an accessibility.",
        discussion: """
            Secrets come from standard input or --secret-file, never from an argument; `get` writes the secret's bytes to \
            standard output as they are. Through the store's agent when one runs (its device as it is: no passcode asked), \
            else in this process (unlocking when the item's class needs it).
            """,
        subcommands: [ItemAdd.self, ItemGet.self, ItemList.self, ItemRemove.self, ItemUpdate.self])
}

/// Which items a command means: `--id`, or attributes (`--attr`, `--service`, `--account`).
struct ItemSelectionOptions: ParsableArguments {
    @Option(name: .customLong("id"), help: ArgumentHelp("The item's identifier (32 hexadecimal digits).", valueName: "id"))
    var id: String?

    @Option(name: .customLong("attr"), help: ArgumentHelp("An attribute the item has, exactly (repeatable).", valueName: "key=value"))
    var attributePairs: [String] = []

    @Option(name: .customLong("service"), help: ArgumentHelp("Shorthand for --attr service=<name>.", valueName: "name"))
    var service: String?

    @Option(name: .customLong("account"), help: ArgumentHelp("Shorthand for --attr account=<name>.", valueName: "name"))
    var account: String?

    /// The attributes given, `--service` and `--account` included.
    func attributes() throws -> [String: String] {
        var attributes = try Self.parse(attributePairs, option: "--attr")
        for (name, value) in [(Keychain.serviceAttribute, service), (Keychain.accountAttribute, account)] {
            guard let value else { continue }
            guard attributes.updateValue(value, forKey: name) == nil else {
                throw ValidationError("--\(name) and --attr \(name)=… both given.")
            }
        }
        return attributes
    }

    var isEmpty: Bool { id == nil && attributePairs.isEmpty && service == nil && account == nil }

    static func parse(_ pairs: [String], option: String) throws -> [String: String] {
        var attributes: [String: String] = [:]
        for pair in pairs {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw ValidationError("\(option) takes key=value, not \(pair.debugDescription).")
            }
            guard attributes.updateValue(String(pair[pair.index(after: equals)...]), forKey: String(pair[..<equals])) == nil else {
                throw ValidationError("\(option) names \(pair[..<equals]) twice.")
            }
        }
        return attributes
    }
}

/// Where a secret comes from: `--secret-file`, else standard input.
struct SecretInput {
    static func read(file: String?) throws(DataProtectionError) -> ItemSecret {
        guard let file, file != "-" else { return try ItemSecret(reading: .standardInput) }
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(FilePath(file), .readOnly)
        } catch {
            throw DataProtectionError(.fileNotFound, "Cannot open the secret file \(file): \(error).")
        }
        defer { try? descriptor.close() }
        return try ItemSecret(reading: descriptor)
    }
}

extension Session {
    /// The store's keychain: the agent's, else this process's, unlocked first when
    /// `protectionClass` needs it (never through an agent).
    func keychain(unlockingFor protectionClass: ProtectionClass?) throws(DataProtectionError) -> any ProtectedKeychain {
        if let agent { return agent.keychain }
        if let protectionClass { try unlock(for: protectionClass) }
        return local!.keychain
    }

    /// The items a selection means (one by `--id`; all matching the attributes otherwise).
    func selectedItems(_ selection: ItemSelectionOptions, in keychain: any ProtectedKeychain) throws -> [KeychainItem] {
        if let id = selection.id {
            guard try selection.attributes().isEmpty else { throw ValidationError("--id and attributes both given.") }
            return [try keychain.item(withID: id)]
        }
        let attributes = try selection.attributes()
        let search = try keychain.items(matching: attributes)
        guard !search.items.isEmpty else { throw Keychain.noMatch(search, "No item matches \(Keychain.describe(attributes)).") }
        return search.items
    }
}

/// An item as `--json` prints it (never its secret).
struct ItemJSON: Encodable {
    let id: String
    let label: String
    let attributes: [String: String]
    let accessibility: String
    let created: Date
    let modified: Date

    init(_ item: KeychainItem) {
        id = item.id
        label = item.label
        attributes = item.attributes
        accessibility = item.accessibility.rawValue
        created = item.creationDate
        modified = item.modificationDate
    }
}

extension ItemAccessibility: ExpressibleByArgument {}
