import ArgumentParser
import DataProtection
import Foundation

/// `dpctl set-class <class> <path>`.
struct SetClass: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-class",
        abstract: "Change an item's protection class (a file's key is rewrapped, its content is not re-encrypted).",
        discussion: "Asks for the passcode only if the old or the new class needs a key.")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions

    @Argument(help: ArgumentHelp("The new class.", valueName: "class"))
    var protectionClass: ProtectionClass

    @Argument(help: ArgumentHelp("The file or directory.", valueName: "path"))
    var path: String

    func run() throws {
        try reporting {
            let session = try Session(storeOptions, passcode: passcodeOptions)
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
