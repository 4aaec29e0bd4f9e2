import ArgumentParser
import DataProtection
import DataProtectionAgent
import DataProtectionBackup
import Foundation
import SystemPackage

/// `dpctl backup create|restore|verify`: age-format archives of the whole store
/// (`Docs/Backups.md`, `Keys/backup-format.md`).
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Back the whole store up into an age archive, restore one into an empty store, or verify one.",
        subcommands: [Create.self, Restore.self, Verify.self])

    /// `--passphrase` and where it comes from.
    struct PassphraseOptions: ParsableArguments {
        @Flag(name: .customLong("passphrase"), help: "Encrypt to (or open with) a passphrase: age's scrypt recipient.")
        var passphrase = false

        @Option(name: .customLong("passphrase-file"), help: ArgumentHelp(
            "Read the passphrase from this file (less one trailing newline). Else $DPCTL_BACKUP_PASSPHRASE, else a no-echo prompt on a terminal.",
            valueName: "file"))
        var passphraseFile: String?

        func obtain(confirm: Bool) throws(DataProtectionError) -> Passcode {
            try PasscodeInput.obtain(file: passphraseFile, variable: "DPCTL_BACKUP_PASSPHRASE", option: "--passphrase-file",
                                     prompt: "Backup passphrase: ", confirm: confirm)
        }
    }

    /// A progress bar over the archive's bytes.
    static func progressBar(total: UInt64?, quiet: Bool) -> ProgressBar {
        ProgressBar(total: total, quiet: quiet)
    }

    /// The archive `restore` and `verify` read, and what opens it.
    struct ArchiveOptions: ParsableArguments {
        @OptionGroup var passphrase: PassphraseOptions

        @Argument(help: ArgumentHelp("The archive, or `-` for standard input.", valueName: "archive"))
        var archive: String

        @Option(name: .customShort("i"), help: ArgumentHelp("An age identity file (AGE-SECRET-KEY-1…, mode 0600); repeatable.", valueName: "file"))
        var identityFiles: [String] = []

        /// Gathers the identities, then opens the archive and hands both to `body` (with the
        /// archive's size when it is a file); the archive is closed after.
        func withArchive<R>(_ body: ([AgeIdentity], BackupInput, UInt64?) throws -> R) throws -> R {
            let identities = try BackupCommand.identities(files: identityFiles, passphrase: passphrase)
            let (input, descriptor, size) = try BackupCommand.input(archive)
            defer { if archive != "-" { try? descriptor.close() } }
            return try body(identities, input, size)
        }
    }

    /// The archive to read: a file, or standard input for `-`.
    static func input(_ given: String) throws(DataProtectionError) -> (BackupInput, FileDescriptor, UInt64?) {
        if given == "-" { return (.fileDescriptor(.standardInput), .standardInput, nil) }
        do {
            let descriptor = try FileDescriptor.open(FilePath(given), .readOnly, options: [.closeOnExec])
            let size = (try? FileManager.default.attributesOfItem(atPath: given)[.size] as? UInt64) ?? nil
            return (.fileDescriptor(descriptor), descriptor, size)
        } catch Errno.noSuchFileOrDirectory {
            throw DataProtectionError(.fileNotFound, "No such archive: \(given).")
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot open the archive \(given): \(error).")
        }
    }

    /// The identities: `-i` files, and the passphrase with `--passphrase`.
    static func identities(files: [String], passphrase: PassphraseOptions) throws(DataProtectionError) -> [AgeIdentity] {
        var identities: [AgeIdentity] = []
        for file in files { identities += try AgeIdentity.identities(inFile: PasscodeInput.contents(ofFile: file)) }
        if passphrase.passphrase || passphrase.passphraseFile != nil { identities.append(AgeIdentity(passphrase: try passphrase.obtain(confirm: false))) }
        guard !identities.isEmpty else {
            throw DataProtectionError(.invalidArgument, "Nothing to open the archive with.",
                                      hint: "Pass -i <identity file> (from age-keygen), or --passphrase.")
        }
        return identities
    }

    /// The entries as `class  size  path` lines.
    static func listing(_ summary: BackupSummary) -> String {
        summary.entries.map { entry in
            let kind = entry.kind == .directory ? "d" : entry.kind == .items ? "i" : "-"
            return "\(kind) \((entry.protectionClass?.rawValue ?? "-").padding(toLength: 36, withPad: " ", startingAt: 0)) \(String(entry.size).leftPadded(12)) \(entry.path)"
        }.joined(separator: "\n")
    }

    /// The report of a backup the agent made.
    static func report(_ summary: AgentBackupSummary, recipients: [AgeRecipient], archive: String?) -> CommandReport {
        CommandReport(["archive": .text(archive), "archiveBytes": .bytes(summary.archiveBytes), "contentBytes": .bytes(summary.contentBytes),
                       "directories": .integer(Int64(summary.directoryCount)), "files": .integer(Int64(summary.fileCount)),
                       "recipients": .string(recipients.map { $0.passphrase == nil ? "X25519" : "scrypt" }.joined(separator: ","))])
    }

    static func report(_ summary: BackupSummary, archive: String?) -> CommandReport {
        CommandReport(["archive": .text(archive), "archiveBytes": .bytes(summary.archiveBytes), "contentBytes": .bytes(summary.contentBytes),
                       "directories": .integer(Int64(summary.directoryCount)), "files": .integer(Int64(summary.fileCount)),
                       "recipients": .string(summary.recipientTypes.joined(separator: ","))])
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

extension BackupCommand {
    /// `dpctl backup create`.
    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write an age archive of the whole store (every directory, file, class and database) to a file or standard output.",
            discussion: """
                Encrypted to each -r/-R recipient (age1…, from age-keygen), or to a passphrase with --passphrase (alone). \
                Readable without dpctl: age -d -i KEY backup.age | tar -x. Needs every class it reads: a class that is not \
                available fails (protectedDataUnavailable, 10) and writes no archive. With -o, the file appears only when \
                complete. Through the agent when one runs (no passcode asked); else the store is opened and unlocked for the run.
                """)

        @OptionGroup var storeOptions: StoreOptions
        @OptionGroup var passcodeOptions: PasscodeOptions
        @OptionGroup var progress: ProgressOptions
        @OptionGroup var report: OutputOptions
        @OptionGroup var passphrase: PassphraseOptions

        @Option(name: .customShort("r"), help: ArgumentHelp("An age X25519 recipient (age1…); repeatable.", valueName: "recipient"))
        var recipients: [String] = []

        @Option(name: .customShort("R"), help: ArgumentHelp("A file of recipients, one age1… per line (# comments); repeatable.", valueName: "file"))
        var recipientFiles: [String] = []

        @Option(name: .customLong("work-factor"), help: ArgumentHelp("scrypt's log2(N) for --passphrase (default 18, as age).", valueName: "n"))
        var workFactor = AgeRecipient.defaultWorkFactor

        @Option(name: [.customShort("o"), .customLong("output")], help: ArgumentHelp("Write the archive to this file; `-` or none: standard output.", valueName: "file"))
        var output: String?

        func validate() throws {
            if report.json && (output == nil || output == "-") {
                throw ValidationError("--json needs -o <file>: without it, standard output holds the archive.")
            }
        }

        func run() throws {
            try reporting {
                var ageRecipients = try recipients.map { (text: String) throws(DataProtectionError) in try AgeRecipient(text) }
                for file in recipientFiles {
                    guard let contents = try? String(contentsOfFile: file, encoding: .utf8) else {
                        throw DataProtectionError(.fileNotFound, "Cannot read the recipients file \(file).")
                    }
                    ageRecipients += try AgeRecipient.recipients(inFile: contents)
                }
                if passphrase.passphrase || passphrase.passphraseFile != nil {
                    ageRecipients.append(try AgeRecipient(passphrase: passphrase.obtain(confirm: true), workFactor: workFactor))
                }
                guard !ageRecipients.isEmpty else {
                    throw DataProtectionError(.invalidArgument, "No recipient.", hint: "Pass -r age1…, -R <file> or --passphrase.")
                }
                if output == nil || output == "-", isatty(STDOUT_FILENO) == 1 {
                    throw DataProtectionError(.invalidArgument, "Standard output is a terminal: the archive is binary.",
                                              hint: "Pass -o <file>, or pipe it (… | restic backup --stdin, … | rclone rcat remote:backup.age).")
                }
                let session = try Session(storeOptions, passcode: passcodeOptions)
                try session.unlock(for: .complete)
                let file = output == nil || output == "-" ? nil : try OutputFile.open(output!)
                let bar = BackupCommand.progressBar(total: nil, quiet: progress.quiet)
                let summary: CommandReport
                do throws(DataProtectionError) {
                    let destination = file?.descriptor ?? .standardOutput
                    if let agent = session.agent {
                        // The agent makes the archive at one instant (Keys/backup-format.md §6); only ciphertext comes back.
                        let made = try agent.createBackup(to: destination, recipients: ageRecipients, includingItems: true) { written in bar.set(written) }
                        summary = BackupCommand.report(made, recipients: ageRecipients, archive: output)
                    } else {
                        let made = try Backup.create(of: session.store, device: session.device, to: .fileDescriptor(destination),
                                                     recipients: ageRecipients,
                                                     items: KeychainBackupItems(session.keychain(unlockingFor: .complete))) { written in
                            bar.set(written)
                        }
                        summary = BackupCommand.report(made, archive: output)
                    }
                    bar.finish()
                    try file?.commit()
                } catch {
                    bar.finish()
                    file?.abandon()
                    throw error
                }
                if report.json { try printJSON(summary) }
            }
        }
    }

    /// `dpctl backup restore`.
    struct Restore: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Restore an age archive into the empty store of this (or any) device: all or nothing.",
            discussion: """
                The store must exist (dpctl init) and be empty (fileExists, 15, otherwise). Everything is written under a \
                staging directory and made visible in one step once the whole archive has authenticated: a tampered, \
                truncated or foreign archive (integrityFailure, 21) or a crash leaves the store as it was.
                """)

        @OptionGroup var storeOptions: StoreOptions
        @OptionGroup var passcodeOptions: PasscodeOptions
        @OptionGroup var progress: ProgressOptions
        @OptionGroup var report: OutputOptions
        @OptionGroup var source: ArchiveOptions

        func run() throws {
            try reporting {
                try source.withArchive { identities, input, size in
                    let session = try Session(storeOptions, passcode: passcodeOptions)
                    try session.unlock(for: .complete)
                    let bar = BackupCommand.progressBar(total: size, quiet: progress.quiet)
                    defer { bar.finish() }
                    let summary = try Backup.restore(from: input, identities: identities, into: session.store,
                                                     items: KeychainBackupItems(session.keychain(unlockingFor: .complete))) { read in bar.set(read) }
                    if report.json { try printJSON(BackupCommand.report(summary, archive: source.archive)) }
                }
            }
        }
    }

    /// `dpctl backup verify`.
    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Authenticate a whole archive and list its entries with their classes; writes nothing.",
            discussion: "Needs no store. Exit 21 (integrityFailure) if any byte of the archive was changed, cut or added.")

        @OptionGroup var progress: ProgressOptions
        @OptionGroup var report: OutputOptions
        @OptionGroup var source: ArchiveOptions

        func run() throws {
            try reporting {
                try source.withArchive { identities, input, size in
                    let bar = BackupCommand.progressBar(total: size, quiet: progress.quiet)
                    let summary = try Backup.verify(from: input, identities: identities) { read in bar.set(read) }
                    bar.finish()
                    if report.json {
                        let encoder = JSONEncoder()
                        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
                        FileHandle.standardOutput.write(try encoder.encode(summary))
                        FileHandle.standardOutput.write("\n")
                    } else {
                        print(BackupCommand.listing(summary))
                    }
                }
            }
        }
    }
}
