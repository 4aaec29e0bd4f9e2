import Foundation

/// Why a scenario (or a scenario file) failed.
public struct ScenarioFailure: Sendable, Hashable, Codable {
    /// What kind of failure.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// The scenario does not follow the language, and did not run (the file, when the
        /// error comes before its first scenario); the file's other scenarios ran.
        case syntax
        /// The file or directory could not be read.
        case file
        /// A step did not produce what it expected.
        case expectation
    }

    /// What kind of failure it is.
    public var kind: Kind
    /// Where: the failing statement (for a syntax error, the offending token).
    public var location: ScenarioLocation
    /// The statement as written, when a statement failed.
    public var statement: String?
    /// What was expected, e.g. `error protectedDataUnavailable`.
    public var expected: String
    /// What happened (or, for a syntax error, what was found), e.g. `ok`.
    public var actual: String

    /// A failure, with where it happened and what was expected and got.
    public init(kind: Kind, location: ScenarioLocation, statement: String? = nil, expected: String, actual: String) {
        self.kind = kind
        self.location = location
        self.statement = statement
        self.expected = expected
        self.actual = actual
    }

    /// `expected …, got …` (for a syntax error: `expected …, found …`).
    public var message: String {
        "expected \(expected), \(kind == .syntax ? "found" : "got") \(actual)"
    }
}

/// How one scenario went (or one file that could not run).
public struct ScenarioResult: Sendable, Hashable, Codable {
    /// The scenario's title; for a file that could not run, the file.
    public var title: String
    /// Where the scenario starts.
    public var location: ScenarioLocation
    /// `nil` when the scenario passed.
    public var failure: ScenarioFailure?
    /// How many steps ran (the failing one included).
    public var stepsRun: Int

    /// The result of one scenario.
    public init(title: String, location: ScenarioLocation, failure: ScenarioFailure? = nil, stepsRun: Int = 0) {
        self.title = title
        self.location = location
        self.failure = failure
        self.stepsRun = stepsRun
    }

    /// Whether the scenario passed.
    public var passed: Bool { failure == nil }

    /// The runner's output line: `PASS <title>`, `FAIL <title> (<file>:<line>): <expected>, <got>`,
    /// or for a syntax error `FAIL <title> (<file>:<line>:<column>): expected …, found …` (the
    /// file in place of the title when the scenario has none, or the error is outside any).
    public var summary: String {
        guard let failure else { return "PASS \(title)" }
        let place = switch failure.kind {
        case .syntax: "\(failure.location):\(failure.location.column)"
        case .file: failure.location.file
        case .expectation: "\(failure.location)"
        }
        return "FAIL \(title) (\(place)): \(failure.message)"
    }

    /// A scenario that does not parse (`title`: its title, `nil` when its `scenario` line gives
    /// none or the error is outside any scenario; `location`: where it starts): it fails, and
    /// only it.
    static func syntaxError(_ error: ScenarioSyntaxError, title: String?, location: ScenarioLocation) -> ScenarioResult {
        ScenarioResult(
            title: title ?? error.file, location: location,
            failure: ScenarioFailure(kind: .syntax, location: ScenarioLocation(file: error.file, line: error.line, column: error.column),
                                     expected: error.expected, actual: error.found))
    }
}
