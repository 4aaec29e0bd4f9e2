import ArgumentParser
import DataProtection
import DataProtectionAgent
import SystemPackage
import Foundation

/// `dpctl put <src|-> <path>`: stores a file, streaming in 1 MiB pieces.
struct Put: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Store a local file (or standard input with `-`) at a path in the store.",
        discussion: """
            Atomic; streams with constant memory. Asks for the passcode only if the file's class needs a key to be created. \
            Prints nothing, unless --json: the stored file's path, size and class.
            """)

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var progress: ProgressOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: ArgumentHelp("The local file to read, or `-` for standard input.", valueName: "src"))
    var source: String

    @Argument(help: ArgumentHelp("The path in the store.", valueName: "path"))
    var path: String

    @Option(name: .customLong("class"), help: "The protection class (default: the replaced file's, else the directory's, else completeUntilFirstUserAuthentication).")
    var protectionClass: ProtectionClass?

    func run() throws {
        try reporting {
            let input: FileHandle
            var total: UInt64?
            if source == "-" {
                input = FileHandle.standardInput
            } else {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: source, isDirectory: &isDirectory) else {
                    throw DataProtectionError(.fileNotFound, "No such local file: \(source).")
                }
                guard !isDirectory.boolValue else { throw DataProtectionError(.isADirectory, "\(source) is a directory.") }
                guard let handle = FileHandle(forReadingAtPath: source) else {
                    throw DataProtectionError(.ioFailure, "Cannot read \(source).")
                }
                input = handle
                total = (try? FileManager.default.attributesOfItem(atPath: source)[.size] as? NSNumber)?.uint64Value
            }
            defer { if source != "-" { try? input.close() } }
            let session = try Session(storeOptions, passcode: passcodeOptions)
            // Existence errors come before the passcode (semantics.md's order).
            if let existing = try? session.store.attributesOfItem(atPath: path), existing.type == .directory {
                throw DataProtectionError(.isADirectory, "\(path) is a directory.")
            }
            if let agent = session.agent {
                // The agent reads the file (or standard input) itself: its descriptor goes over the socket.
                let bar = SharedOffsetProgress(descriptor: input.fileDescriptor, total: total, quiet: progress.quiet)
                defer { bar.stop() }
                try agent.write(contentsOf: FileDescriptor(rawValue: input.fileDescriptor), to: path, protection: ProtectionChoice(protectionClass))
                return try report(session)
            }
            let effective = session.effectiveClass(forNewFileAt: path, given: protectionClass)
            // Creating a completeUnlessOpen file needs only the class B public key.
            if effective != .completeUnlessOpen { try session.unlock(for: effective) }
            let bar = ProgressBar(total: total, quiet: progress.quiet)
            // Read ahead on another thread while the store encrypts.
            let reader = PrefetchingInput(input, pieceSize: transferPieceSize)
            defer {
                reader.cancel()
                // A file is closed on return: let the reader finish first (standard input stays open).
                if source != "-" { reader.waitUntilStopped() }
            }
            do {
                try session.store.write(to: path, protection: ProtectionChoice(protectionClass)) { () throws(DataProtectionError) -> Data? in
                    let piece: Data?
                    do {
                        piece = try reader.next()
                    } catch {
                        throw DataProtectionError(.ioFailure, "Cannot read \(source == "-" ? "standard input" : source): \(error.localizedDescription)")
                    }
                    guard let piece else { return nil }
                    bar.advance(by: piece.count)
                    return piece
                }
            } catch {
                bar.finish()
                throw error
            }
            bar.finish()
            try report(session)
        }
    }

    /// With --json, what was stored: the path, the source, the size and the class.
    private func report(_ session: Session) throws {
        guard output.json else { return }
        let attributes = try session.store.attributesOfItem(atPath: path)
        try printJSON(CommandReport(["path": .text(path), "source": .text(source), "size": .bytes(attributes.size),
                                     "protectionClass": .text(attributes.protectionClass?.rawValue)]))
    }
}
