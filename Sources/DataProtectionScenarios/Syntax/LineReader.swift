import DataProtection
import Foundation

/// Reads the tokens of one statement line left to right; the statement part
/// ends at `->`, after which ``expectationTokens`` are what follows.
struct LineReader {
    let file: String
    let line: Line
    /// Index of the first `->`, if any.
    let arrow: Int?
    private(set) var position = 0

    /// A reader of `line`; unless `expectation`, the statement part ends at the first `->`.
    init(file: String, line: Line, expectation: Bool = false) {
        self.file = file
        self.line = line
        self.arrow = expectation ? nil : line.tokens.firstIndex(where: \.isArrow)
    }

    private var limit: Int { arrow ?? line.tokens.count }

    /// Whether the statement part has no more tokens.
    var atEnd: Bool { position >= limit }

    /// The next statement token, without consuming it.
    func peek() -> Token? { atEnd ? nil : line.tokens[position] }

    mutating func next() -> Token? {
        guard let token = peek() else { return nil }
        position += 1
        return token
    }

    /// The tokens after `->` as a reader of their own (`nil` without an arrow).
    func expectationReader() -> LineReader? {
        guard let arrow else { return nil }
        var rest = line
        rest.tokens = Array(line.tokens[(arrow + 1)...])
        return LineReader(file: file, line: rest, expectation: true)
    }

    // MARK: - Errors

    /// An error at `token` (`nil`: where the statement ends).
    func error(expected: String, at token: Token?, offset: Int = 0) -> ScenarioSyntaxError {
        if let token {
            return ScenarioSyntaxError(file: file, line: line.number, column: token.column + offset, expected: expected, found: token.found)
        }
        guard let arrow else {
            return ScenarioSyntaxError(file: file, line: line.number, column: line.endColumn, expected: expected, found: "end of line")
        }
        return ScenarioSyntaxError(file: file, line: line.number, column: line.tokens[arrow].column, expected: expected, found: "`->`")
    }

    func error(_ value: ValueError, at token: Token) -> ScenarioSyntaxError {
        // Point inside the word only when the offset maps onto its characters.
        let offset = value.offset < token.source.unicodeScalars.count ? value.offset : 0
        return error(expected: value.expected, at: token, offset: offset)
    }

    // MARK: - Words

    /// The next token, which must exist.
    mutating func required(_ expected: String) throws(ScenarioSyntaxError) -> Token {
        guard let token = next() else { throw error(expected: expected, at: nil) }
        return token
    }

    /// A bare word.
    mutating func word(_ expected: String) throws(ScenarioSyntaxError) -> (String, Token) {
        let token = try required(expected)
        guard let word = token.word else { throw error(expected: expected, at: token) }
        return (word, token)
    }

    /// A bare word or a string (paths, passcodes, titles), as UTF-8 text.
    mutating func text(_ expected: String) throws(ScenarioSyntaxError) -> String {
        let token = try required(expected)
        return try text(of: token, expected: expected)
    }

    func text(of token: Token, expected: String) throws(ScenarioSyntaxError) -> String {
        if let word = token.word { return word }
        guard token.bare.isEmpty, let bytes = token.quoted else { throw error(expected: expected, at: token) }
        guard let text = String(data: bytes, encoding: .utf8) else { throw error(expected: "\(expected) in UTF-8", at: token) }
        return text
    }

    /// A `data` value.
    mutating func data() throws(ScenarioSyntaxError) -> Data {
        try data(of: try required(DataValue.expected))
    }

    func data(of token: Token) throws(ScenarioSyntaxError) -> Data {
        if let bytes = token.quoted {
            guard token.bare.isEmpty else { throw error(expected: DataValue.expected, at: token) }
            return bytes
        }
        do throws(ValueError) {
            return try DataValue.parse(word: token.bare)
        } catch {
            throw self.error(error, at: token)
        }
    }

    mutating func size() throws(ScenarioSyntaxError) -> UInt64 {
        let (word, token) = try word(SizeValue.expected)
        return try size(word, at: token)
    }

    func size(_ word: String, at token: Token, offset: Int = 0) throws(ScenarioSyntaxError) -> UInt64 {
        do throws(ValueError) {
            return try SizeValue.parse(word, offset: offset)
        } catch {
            throw self.error(error, at: token)
        }
    }

    mutating func duration() throws(ScenarioSyntaxError) -> Duration {
        let (word, token) = try word(DurationValue.expected)
        return try duration(word, at: token)
    }

    func duration(_ word: String, at token: Token, offset: Int = 0) throws(ScenarioSyntaxError) -> Duration {
        do throws(ValueError) {
            return try DurationValue.parse(word)
        } catch {
            var shifted = error
            shifted.offset += offset
            throw self.error(shifted, at: token)
        }
    }

    mutating func protectionClass() throws(ScenarioSyntaxError) -> ProtectionClass {
        let (word, token) = try word(ClassValue.expected)
        return try protectionClass(word, at: token)
    }

    func protectionClass(_ word: String, at token: Token, offset: Int = 0) throws(ScenarioSyntaxError) -> ProtectionClass {
        do throws(ValueError) {
            return try ClassValue.parse(word)
        } catch {
            var shifted = error
            shifted.offset += offset
            throw self.error(shifted, at: token)
        }
    }

    /// Nothing more before `->` or the end of the line.
    func expectEnd(_ expected: String = "end of statement") throws(ScenarioSyntaxError) {
        if let token = peek() { throw error(expected: expected, at: token) }
    }
}
