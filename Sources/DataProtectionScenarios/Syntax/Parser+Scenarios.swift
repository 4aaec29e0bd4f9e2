import Foundation

/// One scenario of a file as parsed: ready to run, or the syntax error that fails it.
enum ParsedScenario: Sendable {
    case scenario(Scenario)
    /// A scenario that does not follow the language (`title`: its title, if its `scenario`
    /// line gave one; `location`: its `scenario` line), or, with no title, what comes before
    /// a file's first scenario.
    case malformed(title: String?, location: ScenarioLocation, error: ScenarioSyntaxError)
}

// A file split into its scenarios, each parsed on its own: a syntax error fails its own
// scenario and no other (scenario-language.md, "Rulings (1.1)").
extension Parser {
    /// The scenarios of a file's lexed lines, each parsed on its own, in order; lines before
    /// the first scenario (or a file without one) give one result for the file.
    mutating func parse(_ lines: [Lexer.LexedLine]) -> [ParsedScenario] {
        var results: [ParsedScenario] = []
        guard let first = lines.first else {
            let error = ScenarioSyntaxError(file: file, line: 1, column: 1, expected: "`scenario \"<title>\"`", found: "end of file")
            return [.malformed(title: nil, location: ScenarioLocation(file: file, line: 1, column: 1), error: error)]
        }
        var index = 0
        if !Self.opensScenario(first) {
            // Before the first scenario: fails the file, once.
            let error = preambleError(first)
            results.append(.malformed(title: nil, location: ScenarioLocation(file: file, line: error.line, column: error.column), error: error))
            while index < lines.count, !Self.opensScenario(lines[index]) { index += 1 }
        }
        while index < lines.count {
            let start = index
            index += 1
            while index < lines.count, !Self.opensScenario(lines[index]) { index += 1 }
            results.append(scenario(lines[start..<index], following: index < lines.count ? lines[index] : nil))
        }
        return results
    }

    /// Whether a lexed line begins a scenario (its first word is `scenario`).
    private static func opensScenario(_ lexed: Lexer.LexedLine) -> Bool {
        switch lexed {
        case .line(let line): line.tokens.first?.word == "scenario"
        case .malformed(_, let opensScenario): opensScenario
        }
    }

    /// The statement line of `lexed`, or its lexing error.
    private static func line(_ lexed: Lexer.LexedLine) throws(ScenarioSyntaxError) -> Line {
        switch lexed {
        case .line(let line): return line
        case .malformed(let error, _): throw error
        }
    }

    /// The error of a first line that does not begin a scenario.
    private func preambleError(_ lexed: Lexer.LexedLine) -> ScenarioSyntaxError {
        do throws(ScenarioSyntaxError) {
            var reader = LineReader(file: file, line: try Self.line(lexed))
            let (_, token) = try reader.word("`scenario \"<title>\"`")
            return reader.error(expected: "`scenario \"<title>\"`", at: token)
        } catch {
            return error
        }
    }

    /// One scenario: its `scenario` line, its `device` line and its statements (`group`);
    /// `following` is the line after them (the next scenario's), if any.
    private mutating func scenario(_ group: ArraySlice<Lexer.LexedLine>, following: Lexer.LexedLine?) -> ParsedScenario {
        var title: String?
        var location: ScenarioLocation?
        do throws(ScenarioSyntaxError) {
            let head = try Self.line(group[group.startIndex])
            location = ScenarioLocation(file: file, line: head.number, column: head.tokens[0].column)
            var reader = LineReader(file: file, line: head)
            _ = try reader.word("`scenario \"<title>\"`")
            guard reader.arrow == nil else { throw reader.error(expected: "end of line", at: reader.line.tokens[reader.arrow!]) }
            title = try reader.text("a title")
            try reader.expectEnd("end of line")

            handles = []
            databases = []
            let body = group.dropFirst()
            let deviceLine: Line?
            if let first = body.first {
                deviceLine = try Self.line(first)
            } else if let following, case .line(let next) = following {
                deviceLine = next  // the next scenario's line: not `device`
            } else {
                deviceLine = nil
            }
            let setup = try device(deviceLine, after: head)
            var steps: [Step] = []
            for lexed in body.dropFirst() { steps.append(try step(try Self.line(lexed))) }
            return .scenario(Scenario(title: title!, location: location!, setup: setup, steps: steps))
        } catch {
            return .malformed(title: title, location: location ?? ScenarioLocation(file: file, line: error.line, column: 1), error: error)
        }
    }
}
