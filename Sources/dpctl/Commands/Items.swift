import ArgumentParser
import DataProtection
import Foundation

/// `dpctl mkdir <path>`.
struct MakeDirectory: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mkdir",
        abstract: "Create a directory (never asks for the passcode).")

    @OptionGroup var storeOptions: StoreOptions

    @Flag(name: [.customShort("p"), .customLong("parents")], help: "Create missing parents too.")
    var parents = false

    @Option(name: .customLong("class"), help: "The class new entries take (default: the parent's).")
    var protectionClass: ProtectionClass?

    @Argument(help: ArgumentHelp("The directory to create.", valueName: "path"))
    var path: String

    func run() throws {
        try reporting {
            try Session(storeOptions).store.createDirectory(atPath: path, withIntermediateDirectories: parents, protection: protectionClass)
        }
    }
}

/// `dpctl rm <path>`.
struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Remove a file or an empty directory (never asks for the passcode).")

    @OptionGroup var storeOptions: StoreOptions

    @Argument(help: ArgumentHelp("The item to remove.", valueName: "path"))
    var path: String

    func run() throws {
        try reporting { try Session(storeOptions).store.removeItem(atPath: path) }
    }
}

/// `dpctl mv <src> <dst>`.
struct Move: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mv",
        abstract: "Move or rename an item; the destination must not exist (never asks for the passcode).")

    @OptionGroup var storeOptions: StoreOptions

    @Argument(help: ArgumentHelp("The item to move.", valueName: "src"))
    var source: String

    @Argument(help: ArgumentHelp("Its new path.", valueName: "dst"))
    var destination: String

    func run() throws {
        try reporting { try Session(storeOptions).store.moveItem(atPath: source, toPath: destination) }
    }
}

/// `dpctl cp <src> <dst>`.
struct Copy: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cp",
        abstract: "Copy a file within the store.",
        discussion: "Asks for the passcode only if the source's or the copy's class needs a key.")

    @OptionGroup var storeOptions: StoreOptions

    @Option(name: .customLong("class"), help: "The copy's class (default: the source's).")
    var protectionClass: ProtectionClass?

    @Argument(help: ArgumentHelp("The file to copy.", valueName: "src"))
    var source: String

    @Argument(help: ArgumentHelp("The copy's path.", valueName: "dst"))
    var destination: String

    func run() throws {
        try reporting {
            let session = try Session(storeOptions)
            let attributes = try session.store.attributesOfItem(atPath: source)
            guard attributes.type == .file else { throw DataProtectionError(.isADirectory, "\(source) is a directory.") }
            // Existence errors come before the passcode (semantics.md's order).
            if session.store.fileExists(atPath: destination) {
                throw DataProtectionError(.fileExists, "\(destination) already exists.")
            }
            let sourceClass = attributes.protectionClass ?? .default
            try session.unlock(for: sourceClass)
            let copyClass = protectionClass ?? sourceClass
            if copyClass != .completeUnlessOpen { try session.unlock(for: copyClass) }
            try session.store.copyItem(atPath: source, toPath: destination, protection: protectionClass)
        }
    }
}

/// `dpctl set-class <class> <path>`.
struct SetClass: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-class",
        abstract: "Change an item's protection class (a file's key is rewrapped, its content is not re-encrypted).",
        discussion: "Asks for the passcode only if the old or the new class needs a key.")

    @OptionGroup var storeOptions: StoreOptions

    @Argument(help: ArgumentHelp("The new class.", valueName: "class"))
    var protectionClass: ProtectionClass

    @Argument(help: ArgumentHelp("The file or directory.", valueName: "path"))
    var path: String

    func run() throws {
        try reporting {
            let session = try Session(storeOptions)
            let attributes = try session.store.attributesOfItem(atPath: path)
            if attributes.type == .file {
                try session.unlock(for: attributes.protectionClass ?? .default)
                // Changing to completeUnlessOpen needs only the class B public key.
                if protectionClass != .completeUnlessOpen { try session.unlock(for: protectionClass) }
            }
            try session.store.setProtectionClass(protectionClass, ofItemAtPath: path)
        }
    }
}

/// `dpctl erase --yes`.
struct Erase: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Erase the device: every file becomes unrecoverable at once; the store starts afresh with no passcode.")

    @OptionGroup var storeOptions: StoreOptions

    @Flag(name: .customLong("yes"), help: "Confirm the erase.")
    var yes = false

    func validate() throws {
        guard yes else { throw ValidationError("Erasing destroys every file in the store: add --yes to confirm.") }
    }

    func run() throws {
        try reporting {
            try Session(storeOptions).device.erase()
            print("Erased the store at \(storeOptions.directory.path): no passcode, no files.")
        }
    }
}
