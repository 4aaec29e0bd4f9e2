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
            goes on; Ctrl-D leaves). Rows of every statement are printed as `sqlite3` prints them in \
            list mode: columns joined by `|`, NULL as nothing; --json prints one JSON array of row \
            objects (blobs in base64). The database, its journal and its WAL are protected files of \
            the database's class.
            """)

    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var passcodeOptions: PasscodeOptions
    @OptionGroup var output: OutputOptions

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
            // Rows as they come: from a database opened here, or streamed back by the agent.
            // `ran` follows each piece of SQL run: its rows are printed then, before the next
            // read of standard input (which may wait for a line to be typed). At a prompt, a
            // statement that fails is reported and the session goes on, as in `sqlite3`.
            let produce: (_ forEachRow: (SQLiteRow) -> Void, _ ran: () -> Void) throws(DataProtectionError) -> Void
            var database: ProtectedDatabase?
            defer { database?.close() }
            // At a terminal, lines are edited after a prompt, as in `sqlite3`.
            let prompt = statements == nil ? SQLPrompt() : nil
            defer { prompt?.finish() }
            if let agent = session.agent {
                // Streamed to the agent as it is read, rows back as they come: a script or a
                // result of any size, and each statement typed runs at once.
                let source: @Sendable () throws -> Data?
                if let prompt {
                    source = { prompt.nextLine() }
                } else {
                    source = {
                        let read = FileHandle.standardInput.availableData
                        return read.isEmpty ? nil : read
                    }
                }
                produce = { forEachRow, ran throws(DataProtectionError) in
                    let choice = ProtectionChoice(protectionClass)
                    if let statements {
                        return try agent.executeSQL(statements, inDatabaseAtPath: path, create: create, protection: choice, forEachRow: forEachRow)
                    }
                    // At a prompt, the next one waits for the rows of the line before.
                    try agent.executeSQL(inDatabaseAtPath: path, create: create, protection: choice,
                                         reading: source, waitingForEachPiece: prompt != nil, forEachRow: forEachRow, afterRows: ran,
                                         onError: prompt.map { _ in { error in _ = error.reportAndExit() } })
                }
            } else {
                let local = session.local!
                let effective = exists
                    ? try store.attributesOfItem(atPath: path).protectionClass ?? .default
                    : session.effectiveClass(forNewFileAt: path, given: protectionClass)
                // Creating a completeUnlessOpen database needs no passcode, opening one does.
                if exists || effective != .completeUnlessOpen { try session.unlock(for: effective) }
                let opened = try ProtectedDatabase(atPath: path, in: local, create: create, protection: ProtectionChoice(protectionClass))
                database = opened
                // Standard input runs as it is read, in pieces of complete statements (like
                // `sqlite3`): a script of any size in bounded memory.
                produce = { forEachRow, ran throws(DataProtectionError) in
                    try withoutActuallyEscaping(forEachRow) { each throws(DataProtectionError) in
                        if let statements { return try opened.execute(statements, forEachRow: each) }
                        var input = prompt.map { prompt in SQLStatementReader(reading: { [UInt8](prompt.nextLine() ?? Data()) }) }
                            ?? SQLStatementReader(.standardInput)
                        while let sql = try input.next() {
                            do throws(DataProtectionError) {
                                try opened.execute(sql, forEachRow: each)
                            } catch {
                                guard prompt != nil else { throw error }
                                ran()
                                _ = error.reportAndExit()
                            }
                            ran()
                        }
                    }
                }
            }
            prompt?.start(database: path)
            if output.json {
                var rows: [[String: JSONValue]] = []
                try produce({ row in
                    var object: [String: JSONValue] = [:]
                    for (index, value) in row.values.enumerated() { object[row.columns[index]] = JSONValue(value) }
                    rows.append(object)
                }, {})
                return try printJSON(rows)
            }
            let standardOutput = PipelinedOutput(.standardOutput, describe: "standard output")
            var text = Data()
            var outputError: (any Error)?
            do throws(DataProtectionError) {
                let flush = {
                    guard outputError == nil, !text.isEmpty else { return }
                    do {
                        try standardOutput.write(text)
                        if prompt != nil { try standardOutput.finish() }  // on the terminal before the next prompt
                    } catch {
                        outputError = error
                    }
                    text = Data()
                }
                try produce({ row in
                    guard outputError == nil else { return }
                    text.append(row.listModeText)
                    text.append(0x0A)
                    if text.count >= 1 << 16 { flush() }
                }, flush)
            } catch {
                // The rows of the statements before the one that failed are printed, as `sqlite3` does.
                if outputError == nil { try? standardOutput.write(text) }
                try? standardOutput.finish()
                throw error
            }
            if let outputError { throw outputError }
            try standardOutput.write(text)
            try standardOutput.finish()
        }
    }

    /// A value as JSON: numbers, strings, null; blobs as base64 strings.
    enum JSONValue: Encodable {
        case null, integer(Int64), real(Double), text(String)

        init(_ value: SQLiteValue) {
            switch value {
            case .null: self = .null
            case .integer(let number): self = .integer(number)
            case .real(let number): self = .real(number)
            case .text(let text): self = .text(text)
            case .blob(let bytes): self = .text(bytes.base64EncodedString())
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .integer(let number): try container.encode(number)
            case .real(let number): try container.encode(number)
            case .text(let text): try container.encode(text)
            }
        }
    }
}
