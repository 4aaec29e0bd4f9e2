import ArgumentParser
import DataProtection
import DataProtectionSQLite
import Foundation
import SystemPackage

/// `dpctl sql <db-path> [--class <class>] [--create] [--json] ["<sql>"]`.
struct SQL: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sql",
        abstract: "Run SQL against a protected SQLite database in the store.",
        discussion: """
            The statements come from the argument, else from standard input (like `sqlite3`): at a \
            terminal, a session with a `sql> ` prompt (a failed statement is reported and the session \
            goes on; Ctrl-D leaves); from a script, the first failed statement ends it. Rows are printed \
            as `sqlite3` prints them, in list mode by default (columns joined by `|`, NULL as nothing). \
            The dot-commands of `sqlite3`, on a line of their own where no statement has begun: \
            `.tables ?PATTERN?`, `.schema ?PATTERN?`, `.headers on|off`, `.mode list|csv|json|line|column`, \
            `.read FILE`, `.help`, `.quit`, `.exit ?CODE?`. --json starts in `.mode json`: for each \
            statement that returns rows, one JSON array of objects, one per row, keyed by column name. \
            The database, its journal and its WAL are protected files of the database's class.
            """)

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions

    @Flag(name: .customLong("json"), help: """
        Print rows as `.mode json` does: for each statement that returns rows, a JSON array of objects, one per row, \
        keyed by column name, as sqlite3 prints them.
        """)
    var json = false

    @Option(name: .customLong("class"), help: "The class of a database created now (default: its directory's).")
    var protectionClass: ProtectionClass?

    @Flag(help: "Create the database (and missing parent directories) when it is missing.")
    var create = false

    @Argument(help: ArgumentHelp("The database's path in the store.", valueName: "db-path"))
    var path: String

    @Argument(help: ArgumentHelp("The SQL to run (default: standard input).", valueName: "sql"))
    var statements: String?

    func run() throws {
        try reporting {
            let session = try Session(storeOptions, passcode: passcodeOptions)
            let store = session.store
            let exists = store.fileExists(atPath: path)
            guard exists || create else {
                throw DataProtectionError(.fileNotFound, "No database at \(path).", hint: "Pass --create to make one.")
            }
            // At a terminal, lines are edited after a prompt, as in `sqlite3`.
            let prompt = statements == nil ? SQLPrompt() : nil
            defer { prompt?.finish() }
            let input: SQLLineInput = if let statements { .text(statements) } else if let prompt { .prompt(prompt) }
                else { .handle(.standardInput, closeAtEnd: false) }
            let output = SQLOutput()
            let script = SQLSession(input: input, output: output, interactive: prompt != nil, json: json)
            do throws(DataProtectionError) {
                if let agent = session.agent {
                    prompt?.start(database: path)
                    // Each piece goes to the agent once the rows of the one before are printed (a
                    // dot-command's output lands between them); rows come back as they are made.
                    try agent.executeSQL(inDatabaseAtPath: path, create: create, protection: ProtectionChoice(protectionClass),
                                         reading: { () throws(DataProtectionError) -> Data? in try script.nextPiece().map { Data($0.utf8) } },
                                         waitingForEachPiece: true, forEachRow: script.receive, afterRows: { output.flush(beforeReading: false) },
                                         onError: prompt.map { _ in { error in
                                             script.statementFailed()
                                             output.flush(beforeReading: true)
                                             _ = error.reportAndExit()
                                         } })
                } else {
                    let local = session.local!
                    let effective = exists
                        ? try store.attributesOfItem(atPath: path).protectionClass ?? .default
                        : session.effectiveClass(forNewFileAt: path, given: protectionClass)
                    // Creating a completeUnlessOpen database needs no passcode, opening one does.
                    if exists || effective != .completeUnlessOpen { try session.unlock(for: effective) }
                    let database = try ProtectedDatabase(atPath: path, in: local, create: create, protection: ProtectionChoice(protectionClass))
                    defer { database.close() }
                    prompt?.start(database: path)
                    // At a prompt, a statement that fails is reported and the session goes on, as in `sqlite3`.
                    while let sql = try script.nextPiece() {
                        do throws(DataProtectionError) {
                            try database.execute(sql, forEachRow: script.receive)
                        } catch {
                            guard prompt != nil else { throw error }
                            script.statementFailed()
                            output.flush(beforeReading: true)
                            _ = error.reportAndExit()
                        }
                    }
                }
                try script.finish()
            } catch {
                // The rows of the statements before the one that failed are printed, as `sqlite3` does.
                output.flush(beforeReading: true)
                throw error
            }
            if let failure = output.failure { throw failure }
            if script.exitStatus != 0 { throw ExitCode(script.exitStatus) }
        }
    }
}
