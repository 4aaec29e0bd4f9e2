import DataProtection
import DataProtectionSQLite
import Foundation

/// What `dpctl sql` reads and prints, as `sqlite3` does: lines from its inputs cut into the
/// SQL to run (``nextPiece()``) and dot-commands (``SQLDotCommand``), run here where they
/// only change the output and sent as SQL where they need the database (`.tables`, `.schema`);
/// rows (``receive(_:)``) printed in the output mode.
///
/// A dot-command is a line that starts with `.` where no statement has begun (blanks and
/// comments before it do not count), as in `sqlite3`; inside a statement, that line is SQL.
/// The SQL between two dot-commands goes in pieces of whole statements: one statement per
/// piece where the output mode needs to tell statements apart, else as many as the lines at
/// hand hold (up to 64 KiB). A piece is asked for only once the rows of the one before have
/// been received: the database (here or in the agent) runs them in order.
///
/// Used from two threads through the agent (pieces on the sending one, rows on the calling
/// one), never at once: each waits for the other (`waitingForEachPiece`).
final class SQLSession: @unchecked Sendable {
    private var format = SQLOutputFormat()
    private var inputs: [SQLLineInput]
    /// The start of a statement read but not complete yet (what a line beginning with `.` continues).
    private var statement = ""
    /// Complete statements read but not yet handed out.
    private var queued: [String] = []
    /// The dot-command whose query's rows are coming, if any.
    private var command: SQLDotCommand?
    private var commandRows: [SQLiteRow] = []
    /// Whether the statement handed out last has been ended (its output closed).
    private var statementOpen = false
    /// The exit status `.exit N` asked for.
    private(set) var exitStatus: Int32 = 0
    private var quit = false
    private let interactive: Bool
    private let output: SQLOutput

    /// The most bytes of statements in one piece.
    private static let pieceBytes = 1 << 16

    init(input: SQLLineInput, output: SQLOutput, interactive: Bool, json: Bool) {
        inputs = [input]
        self.output = output
        self.interactive = interactive
        if json { format.setMode(.json) }
    }

    /// The next SQL to run (whole statements, or what is left at the end of the input), once
    /// the rows of the last have been received; `nil` at the end of the input or after `.quit`.
    /// Dot-commands met on the way are run (a failed one throws).
    func nextPiece() throws(DataProtectionError) -> String? {
        try endStatement()
        if !queued.isEmpty { return takeQueued() }
        while !quit, let input = inputs.last {
            output.flush(beforeReading: interactive)
            guard let line = try input.nextLine(continuing: !Self.isBlank(statement)) else {
                inputs.removeLast()
                continue
            }
            if line.hasPrefix("."), Self.isBlank(statement) {
                statement = ""
                do throws(DataProtectionError) {
                    if let sql = try run(line) { return open(sql) }
                } catch {
                    // At a prompt, a failed command is reported and the session goes on; a script ends.
                    guard interactive else { throw error }
                    output.flush(beforeReading: true)
                    _ = error.reportAndExit()
                }
                continue
            }
            add(line)
            // More lines at hand (a script) go in the same piece, as long as statements need not be told apart.
            var bytes = line.utf8.count
            while !format.needsStatementBoundaries, bytes < Self.pieceBytes, input.hasBufferedLine,
                  let next = try input.nextLine(continuing: true) {
                if next.hasPrefix("."), Self.isBlank(statement) {
                    input.putBack(next)
                    break
                }
                add(next)
                bytes += next.utf8.count
            }
            if !queued.isEmpty { return takeQueued() }
        }
        // At the end: a last statement without its semicolon runs as it is (as SQLite takes it),
        // completed here so that it runs as its piece arrives (then its rows come before the end).
        guard !Self.isBlank(statement) else { return nil }
        defer { statement = "" }
        return open(statement + "\n;\n")
    }

    /// A row of the SQL handed out last.
    func receive(_ row: SQLiteRow) {
        if command != nil { return commandRows.append(row) }
        output.append(format.format(row))
    }

    /// A statement failed (at a prompt, the session goes on): the rest of its line is dropped, as in `sqlite3`.
    func statementFailed() {
        queued.removeAll()
        command = nil
        commandRows = []
        _ = try? endStatement()
    }

    /// Ends the last statement's output, at the end of the input.
    func finish() throws(DataProtectionError) {
        try endStatement()
        output.flush(beforeReading: true)
    }

    // MARK: -

    private func open(_ sql: String) -> String {
        statementOpen = true
        return sql
    }

    private func takeQueued() -> String {
        if format.needsStatementBoundaries { return open(queued.removeFirst()) }
        defer { queued.removeAll() }
        return open(queued.joined())
    }

    private func endStatement() throws(DataProtectionError) {
        guard statementOpen else { return }
        statementOpen = false
        if let command {
            self.command = nil
            defer { commandRows = [] }
            output.append(Data(try command.output(of: commandRows).utf8))
            return
        }
        output.append(format.endStatement())
    }

    /// Adds a line to the statement being read; its complete statements go to `queued`.
    private func add(_ line: String) {
        statement += line
        guard Self.hasSemicolon(line), ProtectedDatabase.isComplete(statement) else { return }
        if !format.needsStatementBoundaries {
            queued.append(statement)
            statement = ""
            return
        }
        // One statement each: cut at every semicolon where the text before is complete.
        var start = statement.startIndex
        var index = statement.startIndex
        while let semicolon = statement[index...].firstIndex(of: ";") {
            index = statement.index(after: semicolon)
            let candidate = String(statement[start..<index])
            if ProtectedDatabase.isComplete(candidate) {
                queued.append(candidate + "\n")
                start = index
            }
        }
        let rest = String(statement[start...])
        statement = Self.isBlank(rest) ? "" : rest
    }

    /// Runs the dot-command `line`; the SQL it needs run, if any (its rows are then its own).
    private func run(_ line: String) throws(DataProtectionError) -> String? {
        let parsed = try SQLDotCommand.parse(line)
        switch parsed {
        case .mode(let mode):
            guard let mode else {
                output.append(Data("current output mode: \(format.mode.rawValue)\n".utf8))
                return nil
            }
            format.setMode(mode)
        case .headers(let on):
            format.setHeaders(on)
        case .help:
            output.append(Data(SQLDotCommand.helpText.utf8))
        case .quit(let status):
            exitStatus = status
            quit = true
        case .read(let path):
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw DataProtectionError(FileManager.default.fileExists(atPath: path) ? .ioFailure : .fileNotFound, "Cannot open \"\(path)\" for .read.")
            }
            inputs.append(.handle(handle, closeAtEnd: true))
        case .tables, .schema:
            command = parsed
            commandRows = []
            return parsed.query
        }
        return nil
    }

    /// Whether `line` holds a semicolon (memchr(3) on its UTF-8: most lines of a script have one).
    private static func hasSemicolon(_ line: String) -> Bool {
        var line = line
        return line.withUTF8 { bytes in bytes.count > 0 && memchr(bytes.baseAddress!, 0x3B, bytes.count) != nil }
    }

    /// Whether `text` holds only blanks and comments (`-- …` to the end of a line, `/* … */`).
    static func isBlank(_ text: String) -> Bool {
        var bytes = text.utf8[...]
        while let first = bytes.first {
            if first == 0x20 || (0x09...0x0D).contains(first) {
                bytes = bytes.dropFirst()
            } else if bytes.starts(with: "--".utf8) {
                guard let newline = bytes.firstIndex(of: 0x0A) else { return true }
                bytes = bytes[bytes.index(after: newline)...]
            } else if bytes.starts(with: "/*".utf8) {
                let rest = bytes.dropFirst(2)
                guard let end = rest.indices.first(where: { rest[$0...].starts(with: "*/".utf8) }) else { return true }
                bytes = rest[end...].dropFirst(2)
            } else {
                return false
            }
        }
        return true
    }
}

/// Standard output for `dpctl sql`: bytes gathered, written in pieces of 64 KiB, and at once
/// before a line is read at a terminal (so that rows show before the next prompt).
final class SQLOutput: @unchecked Sendable {
    private let standardOutput = PipelinedOutput(.standardOutput, describe: "standard output")
    private var text = Data()
    private let lock = NSLock()
    /// The first failure to write (the reader went away): nothing more is written.
    private(set) var failure: (any Error)?

    func append(_ bytes: Data) {
        lock.withLock {
            text.append(bytes)
            if text.count >= 1 << 16 { write(finishing: false) }
        }
    }

    /// Writes what is gathered; `beforeReading`: at once, all of it.
    func flush(beforeReading: Bool) {
        lock.withLock { write(finishing: beforeReading) }
    }

    private func write(finishing: Bool) {
        guard failure == nil else { return }
        do {
            if !text.isEmpty { try standardOutput.write(text) }
            if finishing { try standardOutput.finish() }
        } catch {
            failure = error
        }
        text = Data()
    }
}
