import ArgumentParser
import DataProtection
import Foundation

/// `dpctl erase --yes`.
struct Erase: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Erase the device: every file becomes unrecoverable at once; the store starts afresh with no passcode.")

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var output: OutputOptions

    @Flag(name: .customLong("yes"), help: "Confirm the erase.")
    var yes = false

    func validate() throws {
        guard yes else { throw ValidationError("Erasing destroys every file in the store: add --yes to confirm.") }
    }

    func run() throws {
        try reporting {
            // The session (and so the store, which removes the files) lives until the erase is done.
            let session = try Session(storeOptions)
            try withExtendedLifetime(session) { () throws(DataProtectionError) in try session.device.erase() }
            try CommandReport(["store": .text(storeOptions.directory.path), "erased": .bool(true), "passcodeSet": .bool(false)])
                .print(json: output.json, text: "Erased the store at \(storeOptions.directory.path): no passcode, no files.")
        }
    }
}
