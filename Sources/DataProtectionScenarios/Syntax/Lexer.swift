import Foundation

/// Splits scenario text into statement lines of tokens.
///
/// Words are separated by spaces or tabs; `#` outside a string starts a comment
/// to the end of the line; blank and comment-only lines are dropped. Strings are
/// `"…"` with the escapes `\n \t \r \\ \" \xHH` (`\xHH` is one raw byte).
struct Lexer {
    let file: String

    /// The statement lines of `contents` (UTF-8; a `\r` before `\n` is dropped).
    ///
    /// - Throws: the first line's error, as ``lexedLines(of:)`` finds it.
    func lines(of contents: Data) throws(ScenarioSyntaxError) -> [Line] {
        var result: [Line] = []
        for lexed in lexedLines(of: contents) {
            switch lexed {
            case .line(let line): result.append(line)
            case .malformed(let error, _): throw error
            }
        }
        return result
    }

    /// One line of a file after lexing: a statement line, or the error that stopped it.
    enum LexedLine {
        case line(Line)
        /// `opensScenario`: the line starts with the word `scenario`, so it begins a scenario
        /// however the rest of it is spelled.
        case malformed(ScenarioSyntaxError, opensScenario: Bool)
    }

    /// Every line of `contents` lexed on its own: an error on one line leaves the others
    /// readable (a syntax error fails only its scenario: scenario-language.md, "Rulings (1.1)").
    /// Blank and comment-only lines are dropped.
    func lexedLines(of contents: Data) -> [LexedLine] {
        var result: [LexedLine] = []
        var number = 0
        for rawLine in contents.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            number += 1
            var bytes = Data(rawLine)
            if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
            let opensScenario = Self.startsWithScenario(bytes)
            guard let text = String(data: bytes, encoding: .utf8) else {
                let valid = Self.validPrefixScalars(of: bytes)
                result.append(.malformed(ScenarioSyntaxError(file: file, line: number, column: valid + 1, expected: "UTF-8 text",
                                                             found: "an invalid byte sequence"), opensScenario: opensScenario))
                continue
            }
            do throws(ScenarioSyntaxError) {
                if let line = try lex(text, number: number) { result.append(.line(line)) }
            } catch {
                result.append(.malformed(error, opensScenario: opensScenario))
            }
        }
        return result
    }

    /// Whether a raw line's first word is `scenario` (after blanks; followed by a blank, a
    /// quote or nothing).
    private static func startsWithScenario(_ bytes: Data) -> Bool {
        let word = Array("scenario".utf8)
        let rest = bytes.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        guard rest.starts(with: word) else { return false }
        guard let next = rest.dropFirst(word.count).first else { return true }
        return next == UInt8(ascii: " ") || next == UInt8(ascii: "\t") || next == UInt8(ascii: "\"") || next == UInt8(ascii: "#")
    }

    /// Tokens of one line; `nil` for a blank or comment-only line.
    func lex(_ text: String, number: Int) throws(ScenarioSyntaxError) -> Line? {
        let scalars = Array(text.unicodeScalars)
        var tokens: [Token] = []
        var index = 0
        var end = 0  // just past the last character of the last token
        func isBlank(_ scalar: Unicode.Scalar) -> Bool { scalar == " " || scalar == "\t" }

        while index < scalars.count {
            if isBlank(scalars[index]) {
                index += 1
                continue
            }
            if scalars[index] == "#" { break }
            let start = index
            var bare = String.UnicodeScalarView()
            while index < scalars.count, !isBlank(scalars[index]), scalars[index] != "#", scalars[index] != "\"" {
                bare.append(scalars[index])
                index += 1
            }
            var quoted: Data?
            if index < scalars.count, scalars[index] == "\"" {
                quoted = try string(scalars, from: &index, line: number)
                if index < scalars.count, !isBlank(scalars[index]), scalars[index] != "#" {
                    throw ScenarioSyntaxError(file: file, line: number, column: index + 1,
                                              expected: "a space after the closing quote", found: "`\(scalars[index])`")
                }
            }
            let source = String(String.UnicodeScalarView(scalars[start..<index]))
            tokens.append(Token(bare: String(bare), quoted: quoted, column: start + 1, source: source))
            end = index
        }
        guard !tokens.isEmpty else { return nil }
        let source = String(String.UnicodeScalarView(scalars[(tokens[0].column - 1)..<end]))
        return Line(number: number, tokens: tokens, source: source, endColumn: end + 1)
    }

    /// Reads a string starting at the `"` at `index`; leaves `index` past the closing quote.
    private func string(_ scalars: [Unicode.Scalar], from index: inout Int, line: Int) throws(ScenarioSyntaxError) -> Data {
        var bytes = Data()
        index += 1
        while index < scalars.count {
            let scalar = scalars[index]
            switch scalar {
            case "\"":
                index += 1
                return bytes
            case "\\":
                guard index + 1 < scalars.count else {
                    throw ScenarioSyntaxError(file: file, line: line, column: index + 2, expected: "an escaped character", found: "end of line")
                }
                let escaped = scalars[index + 1]
                switch escaped {
                case "n": bytes.append(0x0A)
                case "t": bytes.append(0x09)
                case "r": bytes.append(0x0D)
                case "\\": bytes.append(0x5C)
                case "\"": bytes.append(0x22)
                case "x":
                    guard index + 3 < scalars.count,
                          let high = DataValue.hexValue(scalars[index + 2]), let low = DataValue.hexValue(scalars[index + 3]) else {
                        let found = index + 2 < scalars.count ? "`\\x\(String(String.UnicodeScalarView(scalars[(index + 2)..<min(index + 4, scalars.count)])))`" : "end of line"
                        throw ScenarioSyntaxError(file: file, line: line, column: index + 1, expected: "\\x and two hex digits", found: found)
                    }
                    bytes.append(high << 4 | low)
                    index += 2
                default:
                    throw ScenarioSyntaxError(file: file, line: line, column: index + 1,
                                              expected: #"an escape (\n, \t, \r, \\, \" or \xHH)"#, found: "`\\\(escaped)`")
                }
                index += 2
            default:
                bytes.append(contentsOf: Array(String(scalar).utf8))
                index += 1
            }
        }
        throw ScenarioSyntaxError(file: file, line: line, column: scalars.count + 1, expected: "a closing quote", found: "end of line")
    }

    /// How many scalars decode before the first invalid UTF-8 sequence.
    private static func validPrefixScalars(of bytes: Data) -> Int {
        var count = 0
        var decoder = UTF8()
        var iterator = bytes.makeIterator()
        while case .scalarValue = decoder.decode(&iterator) { count += 1 }
        return count
    }
}
