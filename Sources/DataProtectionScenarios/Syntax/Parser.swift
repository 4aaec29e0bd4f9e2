import DataProtection
import Foundation

/// Parses scenario files (`scenario-language.md`, version 1) into ``Scenario`` values.
public enum ScenarioParser {
    /// The scenarios in `contents`, a `.scenario` file named `file` in reports.
    ///
    /// - Throws: ``ScenarioSyntaxError`` at the first statement that does not follow
    ///   the language, naming its line and column and what was expected there.
    public static func parse(_ contents: Data, file: String) throws(ScenarioSyntaxError) -> [Scenario] {
        var parsedScenarios: [Scenario] = []
        for parsed in Self.scenarios(in: contents, file: file) {
            switch parsed {
            case .scenario(let scenario): parsedScenarios.append(scenario)
            case .malformed(_, _, let error): throw error
            }
        }
        return parsedScenarios
    }

    /// Each scenario of `contents` parsed on its own: a syntax error fails its scenario only
    /// (scenario-language.md, "Rulings (1.1)"); anything before the first `scenario` line, or
    /// a file without one, fails as the file.
    static func scenarios(in contents: Data, file: String) -> [ParsedScenario] {
        var parser = Parser(file: file)
        return parser.parse(Lexer(file: file).lexedLines(of: contents))
    }

    /// The scenarios in `text`.
    public static func parse(_ text: String, file: String) throws(ScenarioSyntaxError) -> [Scenario] {
        try parse(Data(text.utf8), file: file)
    }

    /// One statement typed into an interactive session (`dpctl shell`), as a step of an
    /// ongoing scenario whose handle names so far are `handles` (an `open … as h` adds `h`).
    /// `nil` for a blank or comment-only line.
    public static func parseStatement(
        _ text: String, handles: inout Set<String>, file: String = "shell"
    ) throws(ScenarioSyntaxError) -> Step? {
        var databases: Set<String> = []
        return try parseStatement(text, handles: &handles, databases: &databases, file: file)
    }

    /// One statement typed into an interactive session, as ``parseStatement(_:handles:file:)``,
    /// with the database connection names so far in `databases` (a `db open … as d` adds `d`).
    /// `line` is the statement's line number in errors (the shell counts its input lines).
    public static func parseStatement(
        _ text: String, handles: inout Set<String>, databases: inout Set<String>, file: String = "shell", line number: Int = 1
    ) throws(ScenarioSyntaxError) -> Step? {
        // Blank lines before the text give the lexer the line number to report.
        let numbered = String(repeating: "\n", count: max(0, number - 1)) + text
        guard let line = try Lexer(file: file).lines(of: Data(numbered.utf8)).first else { return nil }
        var parser = Parser(file: file)
        parser.handles = handles
        parser.databases = databases
        let step = try parser.step(line)
        handles = parser.handles
        databases = parser.databases
        return step
    }
}

/// What may follow `->` on a statement.
private enum ExpectationKind {
    /// `ok` or `error <code>`.
    case outcome
    /// …or `<data>` (reads).
    case data
    /// …or `<integer>` (`offset`, `size`, `seek-end`).
    case integer
    /// …or names (`ls`).
    case names
    /// …or `key=value…` (`stat`).
    case attributes
    /// Only `ok`: `expect` statements check by themselves.
    case builtIn
}

/// Reads statement lines into steps; Parser+Scenarios.swift splits a file into its scenarios.
struct Parser {
    let file: String
    /// The names an `open … as <h>` so far in the current scenario gives (whether it will succeed
    /// or not: names are bound when a statement runs, scenario-language.md "Rulings (1.1)").
    var handles: Set<String> = []
    /// The names a `db open … as <d>` so far in the current scenario gives. A name in both sets
    /// takes the operations of either; which one it is, the run decides.
    var databases: Set<String> = []

    init(file: String) { self.file = file }

    static let statements = "a statement (unlock, lock, reboot, crash, advance, set-passcode, change-passcode, remove-passcode, "
        + "erase, expect, mkdir, put, get, rm, mv, cp, ls, stat, set-class, open, db open, <handle>.<operation> or <db>.<operation>)"
    static let operations = ["read", "read-to-end", "write", "seek", "seek-end", "offset", "size", "truncate", "sync", "close"]
    static let databaseOperations = ["exec", "query", "close"]

    // MARK: - device

    func device(_ line: Line?, after previous: Line) throws(ScenarioSyntaxError) -> DeviceSetup {
        let expected = "`device` (the first statement of a scenario)"
        guard let line else {
            throw ScenarioSyntaxError(file: file, line: previous.number + 1, column: 1, expected: expected, found: "end of file")
        }
        var reader = LineReader(file: file, line: line)
        let (keyword, token) = try reader.word(expected)
        guard keyword == "device" else { throw reader.error(expected: expected, at: token) }
        var setup = DeviceSetup(location: ScenarioLocation(file: file, line: line.number, column: token.column))
        var seen: Set<String> = []
        let options = "a device option (passcode=<p>, grace=<duration>, erase-after=<n>, inactivity=<duration>)"
        while let token = reader.next() {
            guard let equals = token.bare.firstIndex(of: "=") else { throw reader.error(expected: options, at: token) }
            let key = String(token.bare[..<equals])
            let valueOffset = key.unicodeScalars.count + 1
            guard seen.insert(key).inserted else { throw reader.error(expected: "each device option once", at: token) }
            let value = String(token.bare[token.bare.index(after: equals)...])
            if key == "passcode" {
                var valueToken = token
                valueToken.bare = value
                let passcode = try reader.text(of: valueToken, expected: "a passcode")
                guard !passcode.isEmpty else { throw reader.error(expected: "a non-empty passcode", at: token, offset: valueOffset) }
                setup.passcode = passcode
                continue
            }
            guard token.quoted == nil else { throw reader.error(expected: options, at: token) }
            switch key {
            case "grace": setup.gracePeriod = try reader.duration(value, at: token, offset: valueOffset)
            case "inactivity": setup.inactivityPeriod = try reader.duration(value, at: token, offset: valueOffset)
            case "erase-after":
                guard let count = Int(value), count >= 0, value.allSatisfy(\.isASCII) else {
                    throw reader.error(expected: "a number of failed attempts", at: token, offset: valueOffset)
                }
                setup.eraseAfterFailedAttempts = count
            default:
                throw reader.error(expected: options, at: token)
            }
        }
        try expectation(reader, kind: .builtIn)
        return setup
    }

    // MARK: - Statements

    mutating func step(_ line: Line) throws(ScenarioSyntaxError) -> Step {
        var reader = LineReader(file: file, line: line)
        let (keyword, token) = try reader.word(Self.statements)
        let location = ScenarioLocation(file: file, line: line.number, column: token.column)
        let action: Action
        var kind = ExpectationKind.outcome
        switch keyword {
        case "unlock":
            action = .unlock(passcode: reader.atEnd ? nil : try reader.text("a passcode"))
        case "lock": action = .lock
        case "reboot": action = .reboot
        case "crash": action = .crash
        case "erase": action = .erase
        case "advance": action = .advance(try reader.duration())
        case "set-passcode": action = .setPasscode(try reader.text("the new passcode"))
        case "change-passcode":
            let old = try reader.text("the old passcode")
            action = .changePasscode(old: old, new: try reader.text("the new passcode"))
        case "remove-passcode": action = .removePasscode(old: try reader.text("the old passcode"))
        case "expect":
            action = .expect(try check(&reader))
            kind = .builtIn
        case "mkdir":
            let path = try reader.text("a path")
            action = .mkdir(path: path, protection: try options(&reader, allowing: ["class"]).protection)
        case "put":
            let path = try reader.text("a path")
            let data = try reader.data()
            action = .put(path: path, data: data, protection: try options(&reader, allowing: ["class"]).protection)
        case "get":
            action = .get(path: try reader.text("a path"))
            kind = .data
        case "rm": action = .rm(path: try reader.text("a path"))
        case "mv":
            let from = try reader.text("the source path")
            action = .mv(from: from, to: try reader.text("the destination path"))
        case "cp":
            let from = try reader.text("the source path")
            let to = try reader.text("the destination path")
            action = .cp(from: from, to: to, protection: try options(&reader, allowing: ["class"]).protection)
        case "ls":
            action = .ls(path: try reader.text("a directory path"))
            kind = .names
        case "stat":
            action = .stat(path: try reader.text("a path"))
            kind = .attributes
        case "set-class":
            let path = try reader.text("a path")
            action = .setClass(path: path, protection: try reader.protectionClass())
        case "open":
            action = try open(&reader)
        case "db":
            action = try openDatabase(&reader)
        case "device":
            throw reader.error(expected: "`device` only as the first statement of a scenario", at: token)
        default:
            (action, kind) = try handleOperation(keyword, token: token, reader: &reader)
        }
        try reader.expectEnd()
        let expected = try expectation(reader, kind: kind)
        return Step(action, expectation: expected, location: location, source: line.source)
    }

    private func check(_ reader: inout LineReader) throws(ScenarioSyntaxError) -> DeviceCheck {
        let checks = "state, available, unavailable, events, failed-attempts or protected-data-available"
        let (name, token) = try reader.word(checks)
        switch name {
        case "state":
            let (word, token) = try reader.word("booted, locked or unlocked")
            guard let state = DeviceState(rawValue: word) else { throw reader.error(expected: "booted, locked or unlocked", at: token) }
            return .state(state)
        case "available", "unavailable":
            var classes: [ProtectionClass] = []
            repeat { classes.append(try reader.protectionClass()) } while !reader.atEnd
            return name == "available" ? .available(classes) : .unavailable(classes)
        case "events":
            var events: [DeviceNotification] = []
            let expected = "protectedDataWillBecomeUnavailable or protectedDataDidBecomeAvailable"
            while !reader.atEnd {
                let (word, token) = try reader.word(expected)
                guard let event = DeviceNotification(rawValue: word) else { throw reader.error(expected: expected, at: token) }
                events.append(event)
            }
            return .events(events)
        case "failed-attempts":
            let (word, token) = try reader.word("a number of failed attempts")
            guard let count = Int(word), count >= 0, word.allSatisfy(\.isASCII) else {
                throw reader.error(expected: "a number of failed attempts", at: token)
            }
            return .failedAttempts(count)
        case "protected-data-available":
            let (word, token) = try reader.word("true or false")
            guard let value = Bool(word) else { throw reader.error(expected: "true or false", at: token) }
            return .protectedDataAvailable(value)
        default:
            throw reader.error(expected: checks, at: token)
        }
    }

    private mutating func open(_ reader: inout LineReader) throws(ScenarioSyntaxError) -> Action {
        let path = try reader.text("a path")
        let (keyword, asToken) = try reader.word("`as <handle>`")
        guard keyword == "as" else { throw reader.error(expected: "`as <handle>`", at: asToken) }
        let (handle, token) = try reader.word("a handle name")
        guard Self.isHandleName(handle) else { throw reader.error(expected: "a handle name (letters, digits, _ and -)", at: token) }
        let options = try options(&reader, allowing: ["mode", "create", "class"])
        handles.insert(handle)
        return .open(path: path, handle: handle, mode: options.mode ?? .update, create: options.create, protection: options.protection)
    }

    /// `db open <path> as <d> [create] [class=<class>] [wal]`
    private mutating func openDatabase(_ reader: inout LineReader) throws(ScenarioSyntaxError) -> Action {
        let (verb, verbToken) = try reader.word("`open`")
        guard verb == "open" else { throw reader.error(expected: "`open` (`db open <path> as <d>`)", at: verbToken) }
        let path = try reader.text("a path")
        let (keyword, asToken) = try reader.word("`as <connection>`")
        guard keyword == "as" else { throw reader.error(expected: "`as <connection>`", at: asToken) }
        let (name, token) = try reader.word("a connection name")
        guard Self.isHandleName(name) else { throw reader.error(expected: "a connection name (letters, digits, _ and -)", at: token) }
        let options = try options(&reader, allowing: ["create", "class", "wal"])
        databases.insert(name)
        return .openDatabase(path: path, database: name, create: options.create, protection: options.protection, wal: options.wal)
    }

    private func databaseOperation(
        _ name: String, _ operation: String, token: Token, reader: inout LineReader
    ) throws(ScenarioSyntaxError) -> (Action, ExpectationKind) {
        switch operation {
        case "exec": return (.exec(database: name, sql: try reader.text("SQL")), .outcome)
        case "query": return (.query(database: name, sql: try reader.text("SQL")), .data)
        case "close": return (.closeDatabase(database: name), .outcome)
        default:
            let expected = handles.contains(name)
                ? "a handle or database operation (\((Self.operations + Self.databaseOperations.filter { $0 != "close" }).joined(separator: ", ")))"
                : "a database operation (\(Self.databaseOperations.joined(separator: ", ")))"
            throw reader.error(expected: expected, at: token, offset: name.unicodeScalars.count + 1)
        }
    }

    /// `<name>.<operation>`: a handle's operation when an `open … as <name>` came before it in
    /// the scenario, a connection's when a `db open … as <name>` did (either, when both did:
    /// the run binds the name, and `close` closes what it is then).
    private func handleOperation(
        _ keyword: String, token: Token, reader: inout LineReader
    ) throws(ScenarioSyntaxError) -> (Action, ExpectationKind) {
        guard let dot = keyword.firstIndex(of: ".") else { throw reader.error(expected: Self.statements, at: token) }
        let handle = String(keyword[..<dot])
        let operation = String(keyword[keyword.index(after: dot)...])
        guard Self.isHandleName(handle) else { throw reader.error(expected: Self.statements, at: token) }
        if databases.contains(handle), !handles.contains(handle) || Self.databaseOperations.contains(operation) && operation != "close" {
            return try databaseOperation(handle, operation, token: token, reader: &reader)
        }
        guard handles.contains(handle) else {
            throw reader.error(expected: "a handle opened earlier in this scenario (`open <path> as \(handle)`)", at: token)
        }
        switch operation {
        case "read": return (.read(handle: handle, count: try reader.size()), .data)
        case "read-to-end": return (.readToEnd(handle: handle), .data)
        case "write": return (.write(handle: handle, data: try reader.data()), .outcome)
        case "seek":
            let (word, token) = try reader.word("an offset")
            return (.seek(handle: handle, offset: try reader.size(word, at: token)), .outcome)
        case "seek-end": return (.seekToEnd(handle: handle), .integer)
        case "offset": return (.offset(handle: handle), .integer)
        case "size": return (.size(handle: handle), .integer)
        case "truncate": return (.truncate(handle: handle, size: try reader.size()), .outcome)
        case "sync": return (.sync(handle: handle), .outcome)
        case "close": return (.close(handle: handle), .outcome)
        default:
            let expected = databases.contains(handle)
                ? "a handle or database operation (\((Self.operations + Self.databaseOperations.filter { $0 != "close" }).joined(separator: ", ")))"
                : "a handle operation (\(Self.operations.joined(separator: ", ")))"
            throw reader.error(expected: expected, at: token, offset: handle.unicodeScalars.count + 1)
        }
    }

    static func isHandleName(_ name: String) -> Bool {
        !name.isEmpty && name.unicodeScalars.allSatisfy { $0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_" || $0 == "-" }
    }

    // MARK: - Options

    private struct Options {
        var protection: ProtectionClass?
        var mode: ProtectedFileHandle.Mode?
        var create = false
        var wal = false
    }

    /// `class=<class>`, `mode=<mode>` and `create`, in any order, each at most once.
    private func options(_ reader: inout LineReader, allowing allowed: Set<String>) throws(ScenarioSyntaxError) -> Options {
        var options = Options()
        var seen: Set<String> = []
        let described = ["mode": "mode=read|write|update|append", "create": "create", "class": "class=<class>", "wal": "wal"]
        let expected = (["mode", "create", "class", "wal"].filter(allowed.contains).map { "`\(described[$0]!)`" }).joined(separator: " or ")
        while let token = reader.next() {
            guard let word = token.word else { throw reader.error(expected: expected, at: token) }
            let key = word.firstIndex(of: "=").map { String(word[..<$0]) } ?? word
            guard allowed.contains(key), (key == "create" || key == "wal") == (key == word) else { throw reader.error(expected: expected, at: token) }
            guard seen.insert(key).inserted else { throw reader.error(expected: "`\(key)` only once", at: token) }
            let value = String(word.dropFirst(key.count + 1))
            let offset = key.unicodeScalars.count + 1
            switch key {
            case "class":
                options.protection = try reader.protectionClass(value, at: token, offset: offset)
            case "mode":
                guard let mode = ProtectedFileHandle.Mode(rawValue: value) else {
                    throw reader.error(expected: "a mode (read, write, update or append)", at: token, offset: offset)
                }
                options.mode = mode
            case "wal":
                options.wal = true
            default:
                options.create = true
            }
        }
        return options
    }

    // MARK: - Expectations

    @discardableResult
    private func expectation(_ statement: LineReader, kind: ExpectationKind) throws(ScenarioSyntaxError) -> StepExpectation {
        guard var reader = statement.expectationReader() else { return .success }
        let allowed: String
        switch kind {
        case .outcome: allowed = "`ok` or `error <code>`"
        case .builtIn: allowed = "`ok` (expect statements check by themselves)"
        case .data: allowed = "`ok`, `error <code>` or data"
        case .integer: allowed = "`ok`, `error <code>` or an integer"
        case .names: allowed = "`ok`, `error <code>`, `empty` or names"
        case .attributes: allowed = "`ok`, `error <code>` or class=…, size=…, type=…"
        }
        guard let first = reader.peek() else {
            if kind == .names { return .names([]) }
            throw reader.error(expected: allowed, at: nil)
        }
        let result: StepExpectation
        switch first.word {
        case "ok":
            _ = reader.next()
            result = .success
        case "error" where kind != .builtIn:
            _ = reader.next()
            let (word, token) = try reader.word("an error code")
            guard let code = DataProtectionError.Code(rawValue: word) else {
                throw reader.error(expected: "an error code (\(DataProtectionError.Code.allCases.map(\.rawValue).joined(separator: ", ")))", at: token)
            }
            result = .error(code)
        default:
            switch kind {
            case .outcome, .builtIn:
                throw reader.error(expected: allowed, at: first)
            case .data:
                result = .data(try reader.data())
            case .integer:
                result = .integer(try reader.size())
            case .names:
                var names: [String] = []
                while let token = reader.next() {
                    if let word = token.word, NameList.keywords.contains(word) {
                        if word == "empty", names.isEmpty, reader.atEnd { break }
                        throw reader.error(expected: "a name (a keyword as a name is written as a string, e.g. \"\(word)\")", at: token)
                    }
                    names.append(try reader.text(of: token, expected: "a name"))
                }
                result = .names(names)
            case .attributes:
                result = .attributes(try attributes(&reader))
            }
        }
        try reader.expectEnd("end of line")
        return result
    }

    private func attributes(_ reader: inout LineReader) throws(ScenarioSyntaxError) -> AttributeExpectation {
        var attributes = AttributeExpectation()
        var seen: Set<String> = []
        let expected = "class=<class>, size=<bytes> or type=file|directory"
        while let token = reader.next() {
            guard let word = token.word, let equals = word.firstIndex(of: "=") else { throw reader.error(expected: expected, at: token) }
            let key = String(word[..<equals])
            let value = String(word[word.index(after: equals)...])
            let offset = key.unicodeScalars.count + 1
            guard seen.insert(key).inserted else { throw reader.error(expected: "`\(key)` only once", at: token) }
            switch key {
            case "class": attributes.protectionClass = try reader.protectionClass(value, at: token, offset: offset)
            case "size": attributes.size = try reader.size(value, at: token, offset: offset)
            case "type":
                guard let type = ProtectedItemAttributes.ItemType(rawValue: value) else {
                    throw reader.error(expected: "file or directory", at: token, offset: offset)
                }
                attributes.type = type
            default:
                throw reader.error(expected: expected, at: token)
            }
        }
        return attributes
    }
}
